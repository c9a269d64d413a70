"""`opsrunner history prune` never deletes a run that may still be going on: an open row
whose controller lives (its pid and start time here, its heartbeat elsewhere) is kept, and
the run records the rest of itself; a finished row, or an open one whose controller is
gone, is deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opsrunner.history.liveness import STALE_AFTER_S, ControllerStamp, machine_key, start_ticks
from opsrunner.history.store import HistoryStore, RunRow, TaskRow
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import CliResult, cli_subprocess


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"command": "true"}]}])
    write_yaml(proj / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "first", "command": "true"}, {"name": "long", "command": "sleep 3"},
        {"name": "last", "command": "true"}]}])
    return proj


def run(project: Path, db: Path, *args: str) -> CliResult:
    return cli_subprocess(*args, cwd=project, env={"OPSRUNNER_HISTORY": str(db)})


def _dead_stamp() -> ControllerStamp:
    """The stamp of a controller that is gone: a process of this machine, exited and reaped."""
    child = subprocess.Popen(["true"])
    stamp = ControllerStamp(child.pid, start_ticks(child.pid) or 1, machine_key())
    child.wait()
    return stamp


def test_prune_during_a_run_keeps_it_and_the_run_records_the_rest(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0  # finished: pruned
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml"],
                                  cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: json.loads(run(project, db, "history", "--json").out)[0]["tasks"], 60)
        time.sleep(0.05)
        pruned = run(project, db, "history", "prune", "--keep-days", "0")
        assert pruned.rc == 0, pruned.err
        assert pruned.out == f"removed 1 run(s) older than 0 days from {db}; kept 1 still running\n"
        _, err = controller.communicate(timeout=60)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.communicate()
    assert controller.returncode == 0, err
    assert "WARNING" not in err and "IntegrityError" not in err, err
    (row,) = json.loads(run(project, db, "history", "--json").out)
    assert row["label"] == "ok" and row["playbook"].endswith("slow.yml")
    assert [t["task"] for t in row["tasks"]] == ["first", "long", "last"] and set(row["recap"]) == {"h1"}
    assert [r["id"] for r in json.loads(run(project, db, "history", "--json", "--host", "h1").out)] == [row["id"]]
    again = run(project, db, "history", "prune", "--keep-days", "0")
    assert again.out == f"removed 1 run(s) older than 0 days from {db}\n"  # finished now: pruned
    assert json.loads(run(project, db, "history", "--json").out) == []


def _prune_keeps_only_live_rows(store: HistoryStore) -> None:
    old = time.time() - 3600
    task = TaskRow("p", "t", "command", "h1", "ok", False, False, "", "", 0.1)
    live_here = ControllerStamp.of_this_process()
    elsewhere = ControllerStamp(12345, 1, "another-boot/pid:[1]")
    for run_id, stamp in (("live-here", live_here), ("dead-here", _dead_stamp()), ("live-elsewhere", elsewhere),
                          ("stale-elsewhere", elsewhere), ("finished", live_here)):
        store.start_run(RunRow(id=run_id, started=old), stamp)
        store.add_tasks(run_id, [(1, task)])
    store.finish_run("finished", 0, {"h1": {"ok": 1}})
    store.backend.execute("UPDATE runs SET heartbeat = ? WHERE id IN ('live-here', 'stale-elsewhere')",
                          (old,))  # a heartbeat stale by far: this process lives all the same
    assert store.prune_runs(0) == (3, 2)
    assert sorted(r.id for r in store.runs()) == ["live-elsewhere", "live-here"]
    assert sorted(r.id for r in store.runs(host="h1")) == ["live-elsewhere", "live-here"]
    store.add_tasks("live-here", [(2, task)])  # the live run goes on writing
    store.finish_run("live-here", 0, {"h1": {"ok": 2}})
    assert [t.task for t in store.run("live-here").tasks] == ["t", "t"]  # type: ignore[union-attr]
    store.backend.execute("UPDATE runs SET heartbeat = ? WHERE id = 'live-elsewhere'",
                          (time.time() - STALE_AFTER_S - 1,))
    assert store.prune(0) == 2 and store.runs() == []


def test_prune_keeps_live_rows_sqlite(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.db")
    _prune_keeps_only_live_rows(store)
    store.close()


def test_prune_keeps_live_rows_postgres(pg_url: str) -> None:
    store = HistoryStore(pg_url)
    _prune_keeps_only_live_rows(store)
    store.close()
