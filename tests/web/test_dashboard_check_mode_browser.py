"""The hosts page in a real headless Chromium after a real restart of the bundled demo
trainer crashed and a dry run (`--check`) of the same playbook went ok: the host's verdict
stays the real failure, the dry run shows beside it with a check badge, and the runs page
lists the dry run with its badge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kill_marked
from tests.helpers import cli_subprocess
from tests.web.dashboard import Project, serving


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    p = Project(tmp_path)
    yield p
    kill_marked(str(tmp_path))  # the demo trainer, if it still lives


def _run_id(env: dict[str, str]) -> str:
    return cli_subprocess("history", "-n", "1", env=env).out.splitlines()[1].split()[0]


def test_browser_hosts_page_keeps_a_real_failure_over_a_later_dry_run(project: Project, page: Any) -> None:
    home = project.root / "home"
    home.mkdir()
    env = {**project.env, "HOME": str(home)}
    crashed = cli_subprocess("play", "restart_training.yml", "-e", "train_extra_args=--crash-after=2", env=env,
                             timeout=180)
    assert crashed.rc == 2, crashed.out + crashed.err
    failed = _run_id(env)
    checked = cli_subprocess("play", "restart_training.yml", "-C", env=env, timeout=180)
    assert checked.rc == 0, checked.out + checked.err
    dry = _run_id(env)
    nowhere = cli_subprocess("play", "restart_training.yml", "-l", "nosuchhost", env=env, timeout=180)
    assert nowhere.rc == 1, nowhere.out + nowhere.err  # recorded, and ran nothing
    with serving(project) as server:
        page.goto(server.url + "/hosts")
        row = page.locator("#hosts tbody tr", has_text="restart_training.yml")
        assert row.count() == 1
        assert row.get_attribute("class") == "verdict-failed"
        assert row.locator("td").nth(2).inner_text() == "failed"
        assert row.locator("td").nth(3).inner_text() == failed
        since = row.locator("td.dry-run-since")
        assert since.locator(".badge.check").inner_text() == "check"
        assert since.locator("a").inner_text() == dry and " ok " in f" {since.inner_text()} "
        page.goto(server.url + "/")
        dry_row = page.locator("#runs tbody tr", has_text=dry)
        assert dry_row.locator("td.result .badge.check").inner_text() == "check"
        assert dry_row.locator("td.result").inner_text().startswith("dry run")
        assert page.locator("#runs tbody tr", has_text=failed).locator(".badge").count() == 0
        assert page.locator(".chart circle").count() == 1  # the real run's duration only, not the one of no host
        page.goto(f"{server.url}/runs/{dry}")
        assert page.locator("h1 .badge.check").inner_text() == "check"
