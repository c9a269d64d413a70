"""The page of a run whose controller was killed (SIGKILL) in a real headless Chromium: open
while the run goes on it says `now in` its task; once the controller is gone it says `was in`
that task (as `show` does), updated in place and as the server renders it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kill_marked, wait_for
from tests.web.aborted import WAIT, in_wait, kill_controller, playing, slow_site
from tests.web.dashboard import Project, serving


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    p = Project(tmp_path)
    yield p
    kill_marked(str(tmp_path))


def test_browser_an_aborted_runs_page_says_was_in_its_task(project: Project, page: Any) -> None:
    from playwright.sync_api import expect  # here: where playwright is missing, the page fixture says so

    marker = slow_site(project)
    with serving(project) as server, playing(project, marker) as pid:
        assert wait_for(lambda: in_wait(project) is not None, 60, 0.2)
        run_id = in_wait(project)
        page.goto(f"{server.url}/runs/{run_id}")
        assert page.locator("#now-in").inner_text() == f"now in: {WAIT}"
        page.evaluate("window.notReloaded = true")
        kill_controller(pid)
        expect(page.locator("#label")).to_have_text("aborted (controller gone)", timeout=30000)
        assert page.locator("#now-in").inner_text() == f"was in: {WAIT}"
        assert page.evaluate("window.notReloaded") is True  # the same document, updated in place
        page.reload()
        assert page.locator("#label").inner_text() == "aborted (controller gone)"
        assert page.locator("#now-in").inner_text() == f"was in: {WAIT}"
        assert server.get(f"/api/runs/{run_id}").json()["aborted"] is True
