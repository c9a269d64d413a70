"""What a task in flight has done so far (a stop's signals: interrupts.so_far) reaches the
run's subscribers as TaskProgress, as a library caller sees it; a callback that raises on it
never fails the task, and a no_log task's progress is never told."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from opsrunner import api
from opsrunner.events import Event, TaskEnd, TaskProgress
from tests.conftest import kill_marked, pids_with, sleep_marker, wait_for, write_yaml


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A running `sleep` the stop below finds by its pattern; its marker."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    marker = sleep_marker()
    subprocess.run(["sh", "-c", f"sleep {marker} >/dev/null 2>&1 &"], check=True)
    assert wait_for(lambda: bool(pids_with(marker)), 10)
    write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"a": {"connection": "local"}}}})
    yield tmp_path, marker
    kill_marked(marker)


def _stop(project: Path, marker: str, no_log: bool) -> list[Event]:
    stop = {"pidfile": str(project / "job.pid"), "pattern": marker.replace(".", r"\."), "grace": 2}
    write_yaml(project / "stop.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Stop the job", "kill_old": stop, "no_log": no_log}]}])
    seen: list[Event] = []

    def callback(event: Event) -> None:
        seen.append(event)
        if isinstance(event, TaskProgress):
            raise RuntimeError("a caller's callback that fails on it")

    result = api.run(api.PlayRequest("stop.yml", inventory=["inv.yml"], history=False), on_event=callback)
    assert result.exit_code == 0
    assert not pids_with(marker)
    [end] = [e for e in seen if isinstance(e, TaskEnd)]
    assert end.result.changed, end.result.msg
    return seen


def test_a_stops_progress_reaches_the_callback_which_cannot_fail_it(job: tuple[Path, str]) -> None:
    progress = [e for e in _stop(*job, no_log=False) if isinstance(e, TaskProgress)]
    assert progress and all(e.host == "a" and e.task == "Stop the job" and e.module == "kill_old" for e in progress)
    assert progress[-1].text.startswith("stop interrupted: sent SIGTERM to 1 at "), progress[-1].text


def test_a_no_log_tasks_progress_is_never_told(job: tuple[Path, str]) -> None:
    assert not [e for e in _stop(*job, no_log=True) if isinstance(e, TaskProgress)]
