"""The time a killed controller's record names ('results after HH:MM:SS may be missing') is a
true bound: every result the controller had reported before it is in the record, also where
the run's row is written late (a slow `git status`) and its first write then fails, and where
a play's first results are its failed preflight followed by a long task. A task's start is
recorded within about WRITE_SOON_S (what `show` names as `was in`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from opsrunner.history.store import open_history
from tests.conftest import ROOT, write_yaml
from tests.helpers import cli_subprocess, stop
from tests.history.test_hist_killed_controller_record import GAP, _gap_time, _kill


def _controller(project: Path, db: Path, **env: str) -> subprocess.Popen[str]:
    full = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT), **env)
    return subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "pb.yml", "-i", "inv.yml", "--json-events",
                             "-"], cwd=project, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _until(controller: subprocess.Popen[str], event: str, task: str) -> dict[str, object]:
    assert controller.stdout is not None
    for line in controller.stdout:
        found = json.loads(line)
        if found.get("event") == event and found.get("task") == task:
            return dict(found)
    raise AssertionError(f"no {event} of {task!r}")


def _runs(project: Path, db: Path) -> list[dict[str, object]]:
    return list(json.loads(cli_subprocess("history", "--json", cwd=project, env={"OPSRUNNER_HISTORY": str(db)}).out))


def test_a_row_written_late_never_claims_results_reported_before_it(tmp_path: Path, cleanup_marker: str) -> None:
    """`git` takes 2.5 s (a big checkout), so the run's row is inserted after the first task
    changed the host; the first write of that result then fails (the database refuses it) and
    the controller is killed later: the record says results may be missing from a time no
    later than that result, not from when the row was inserted."""
    project, db, slow = tmp_path / "proj", tmp_path / "h.db", tmp_path / "bin"
    write_yaml(project / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(project / "pb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "change the host", "command": f"touch {tmp_path / 'touched'}"},
        {"name": "block", "command": f"sleep {cleanup_marker}"}]}])
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nsleep 2.5\nexec /usr/bin/git \"$@\"\n")
    (slow / "git").chmod(0o755)
    store = open_history(db)
    assert store.db is not None
    store.db.execute("CREATE TRIGGER refused BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'refused'); END")
    store.close()
    controller = _controller(project, db, PATH=f"{slow}:{os.environ['PATH']}")
    try:
        assert _until(controller, "task_end", "change the host")["status"] == "changed"
        seen = time.time()
        assert controller.stderr is not None
        warning = controller.stderr.readline()  # the first write, after the late insert, failed
        assert "WARNING: run history not recorded" in warning and "refused" in warning, warning
        assert time.time() - seen > 1.2, "the row was not inserted after the result"
        _kill(controller)
    finally:
        stop(controller)
    (run,) = _runs(project, db)
    assert run["result"] == "aborted (controller gone)" and run["tasks"] == [], run
    shown = cli_subprocess("show", str(run["id"]), cwd=project, env={"OPSRUNNER_HISTORY": str(db)}).out
    assert GAP.search(shown), shown
    assert _gap_time(shown, float(str(run["started"]))) <= seen, (shown, time.strftime("%H:%M:%S",
                                                                                      time.localtime(seen)))


def test_a_failed_preflight_is_recorded_before_a_long_first_task_ends(tmp_path: Path, cleanup_marker: str) -> None:
    """A host that fails preflight is failed at the play's start; a controller killed a second
    into the play's first (long) task has that failure in its record, not only in its gap."""
    project, db = tmp_path / "proj", tmp_path / "h.db"
    write_yaml(project / "inv.yml", {"all": {"hosts": {"good": {"connection": "local", "grace": 3},
                                                       "bad": {"connection": "local", "grace": "thirty"}}}})
    write_yaml(project / "pb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "long migration", "command": f"sleep {cleanup_marker}"},
        {"name": "stop by pidfile", "kill_old": {"pidfile": str(tmp_path / "x.pid"), "grace": "{{ grace }}"}}]}])
    controller = _controller(project, db)
    try:
        assert _until(controller, "task_end", "preflight")["host"] == "bad"
        _until(controller, "task_start", "long migration")
        time.sleep(1.2)  # past a write that stamps the row (the task's start)
        _kill(controller)
    finally:
        stop(controller)
    (run,) = _runs(project, db)
    assert run["result"] == "aborted (controller gone)", run
    tasks = run["tasks"]
    assert isinstance(tasks, list)
    assert [(t["task"], t["host"], t["status"]) for t in tasks] == [("preflight", "bad", "failed")], run
    assert run["current_task"] == "long migration", run


def test_a_task_start_is_recorded_before_any_result_of_it(tmp_path: Path, cleanup_marker: str) -> None:
    """A task whose start follows an ok result (nothing else wakes the history's writer): a
    controller killed 0.1 s after it started names it as the task it was in. With the 0.2 s
    batch alone half of such kills name the task before; one late of 6 is allowed (a loaded
    machine)."""
    project, db = tmp_path / "proj", tmp_path / "h.db"
    write_yaml(project / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}, "h2": {"connection": "local"}}}})
    write_yaml(project / "pb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "change h1, check h2", "shell": "if [ {{ inventory_hostname }} = h2 ]; then sleep "
                                                 "{{ 0.3 + (range(0, 20) | random) / 100 }}; fi; echo same",
         "changed_when": "inventory_hostname == 'h1'"},
        {"name": "block", "command": f"sleep {cleanup_marker}"}]}])
    for _ in range(6):
        controller = _controller(project, db)
        try:
            _until(controller, "task_start", "block")
            time.sleep(0.1)
            _kill(controller)
        finally:
            stop(controller)
    runs = _runs(project, db)
    assert len(runs) == 6
    late = [run for run in runs if run["current_task"] != "block"]
    assert len(late) <= 1, [(r["current_task"], r["heartbeat"]) for r in runs]
