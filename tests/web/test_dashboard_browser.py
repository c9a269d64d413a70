"""The dashboard in a real headless Chromium (Debian's, through Playwright): a real failed
run and its diagnosis, a live run that updates without a reload, the schedules' next runs,
and a `<script>` task name shown as text. Every run is a real `opsrunner play`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kill_marked, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process, user_crontab
from tests.web.dashboard import Project, Server, serving, wait_until

HOSTILE = "<script>document.title='owned'</script><img src=x onerror=\"document.title='owned'\">"
LIVE = [{"name": "Live demo", "hosts": "all", "tasks": [
    {"name": "Before the pause", "shell": "echo before"},
    {"name": HOSTILE, "pause": {"seconds": 4}},
    {"name": "After the pause", "shell": "echo after"},
]}]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    p = Project(tmp_path)
    yield p
    kill_marked(str(tmp_path))  # the demo trainer of the crash test, if it still lives


def _crashed_run(project: Project) -> str:
    """A real restart of the bundled demo trainer that crashes: verify diagnoses it."""
    home = project.root / "home"
    home.mkdir()
    env = {**project.env, "HOME": str(home)}
    played = cli_subprocess("play", "restart_training.yml", "-e", "train_extra_args=--crash-after=2", env=env,
                            timeout=180)
    assert played.rc == 2, played.out + played.err
    listing = cli_subprocess("history", "-n", "1", env=env)
    return listing.out.splitlines()[1].split()[0]


def test_browser_runs_page_lists_a_failed_run_and_its_page_shows_the_diagnosis(project: Project, page: Any) -> None:
    run_id = _crashed_run(project)
    with serving(project) as server:
        page.goto(server.url + "/")
        row = page.locator("#runs tbody tr", has_text=run_id)
        assert row.locator("td.result").inner_text() == "failed (exit 2)"
        assert "restart_training.yml" in row.inner_text() and "localhost" in row.inner_text()
        assert page.locator(".chart circle").count() == 1
        row.locator("a").click()
        page.wait_for_url(f"{server.url}/runs/{run_id}")
        diagnosis = page.locator("#tasks .diagnosis").first.inner_text()
        assert re.match(r"diagnosis: the job \(pid \d+\) exited with code 1\b", diagnosis), diagnosis
        assert "RuntimeError: simulated crash" in page.locator("#tasks .log-tail").first.inner_text()
        assert page.locator("#label").inner_text() == "failed (exit 2)"
        assert "train_extra_args=--crash-after=2" in page.locator("dl.config").inner_text()


def _running_run(server: Server) -> str | None:
    runs = server.get("/api/runs").json()["runs"]
    return str(runs[0]["id"]) if runs and runs[0]["label"] == "running" else None


def test_browser_live_run_updates_without_reload_and_shows_a_script_name_as_text(project: Project,
                                                                                  page: Any) -> None:
    from playwright.sync_api import expect  # here: where playwright is missing, the page fixture says so

    write_yaml(project.dir / "live.yml", LIVE)
    with serving(project) as server, opsrunner_process("play", "live.yml", "-i", "inv.yml", "-l", "web1",
                                                       cwd=project.dir, env=project.env) as play:
        assert wait_until(lambda: _running_run(server) is not None and
                          server.get(f"/api/runs/{_running_run(server)}").json()["current_task"] == HOSTILE)
        run_id = _running_run(server)
        page.goto(f"{server.url}/runs/{run_id}")
        assert page.locator("#label").inner_text() == "running"
        assert page.locator("#current-task").inner_text() == HOSTILE  # the name, as text
        page.evaluate("window.notReloaded = true")
        expect(page.locator("#label")).to_have_text("ok", timeout=30000)
        assert page.evaluate("window.notReloaded") is True  # the same document, updated in place
        tasks = page.locator("#tasks td.task").all_inner_texts()
        assert tasks == ["Before the pause", HOSTILE, "After the pause"]
        assert page.locator("#recap tbody td").first.inner_text() == "web1"
        assert page.title().startswith("Run ") and page.locator("#tasks img").count() == 0
        assert play.wait(30) == 0
        page.reload()  # the page as the server renders it escapes the name too
        assert page.locator("#tasks td.task").all_inner_texts() == tasks
        assert page.title().startswith("Run ") and page.locator("#tasks img, #tasks script").count() == 0


def test_browser_schedules_page_shows_next_runs(project: Project, page: Any) -> None:
    user_crontab(project.root, project.env)  # cron's lines in a user's crontab: active
    for name, when in (("every-hour", "hourly"), ("nightly", "*-*-* 03:00:00")):
        assert project.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", when, "--cron").rc == 0
    with serving(project) as server:
        expected = server.get("/api/schedules").json()["schedules"]
        page.goto(server.url + "/schedules")
        rows = page.locator("#schedules tbody tr")
        assert rows.count() == 2
        assert [rows.nth(i).locator("td").first.inner_text() for i in range(2)] == [s["name"] for s in expected]
        shown = page.locator("#schedules td.next-run").all_inner_texts()
        assert shown == [s["next_run"] for s in expected]
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:00", t) for t in shown)
        assert shown[1].endswith("03:00:00") and shown[0].endswith(":00:00")
        assert "cron: active" in rows.nth(0).inner_text() and "never ran" in rows.nth(0).inner_text()
