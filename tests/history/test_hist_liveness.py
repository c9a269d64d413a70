"""On the controller's own machine, its process tells whether an open run goes on: a
controller stopped (SIGSTOP) long past its heartbeat is `running`, never `aborted
(controller gone)`, and finishes its run once continued. Rows of other machines fall back to
the heartbeat's age; a controller that exited (reaped or not) is gone at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opsrunner.history.liveness import GONE, STALE_AFTER_S, ControllerStamp, machine_key, start_ticks
from opsrunner.history.store import HistoryStore, RunRow
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import CliResult, cli_subprocess


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "first", "command": "true"}, {"name": "long", "command": "sleep 3"},
        {"name": "last", "command": "true"}]}])
    return proj


def run(project: Path, db: Path, *args: str) -> CliResult:
    return cli_subprocess(*args, cwd=project, env={"OPSRUNNER_HISTORY": str(db)})


def _age_heartbeat(db: Path, controller: subprocess.Popen[bytes], seconds: float) -> None:
    """Make the stopped controller's row look `seconds` old: what a stop that long leaves. A
    controller stopped inside one of its (short) transactions holds the write lock: let it
    finish that one and stop it again."""
    for _ in range(50):
        try:
            with sqlite3.connect(db, timeout=1) as conn:
                conn.execute("UPDATE runs SET heartbeat = heartbeat - ?, started = started - ?", (seconds, seconds))
            return
        except sqlite3.OperationalError:
            controller.send_signal(signal.SIGCONT)
            time.sleep(0.05)
            controller.send_signal(signal.SIGSTOP)
    pytest.fail("the history stayed locked")


def test_a_stopped_controller_is_running_however_old_its_heartbeat(project: Path, tmp_path: Path) -> None:
    from opsrunner.web.data import run_detail, run_summary

    db = tmp_path / "h.db"
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml"],
                                  cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: db.exists() and json.loads(run(project, db, "history", "--json").out)[0]["tasks"],
                        60)
        controller.send_signal(signal.SIGSTOP)
        _age_heartbeat(db, controller, 10 * STALE_AFTER_S)
        (row,) = json.loads(run(project, db, "history", "--json").out)
        assert time.time() - row["heartbeat"] > 10 * STALE_AFTER_S  # stale by far...
        assert (row["result"], row["label"], row["exit_code"]) == ("running", "running", None)  # ...and alive
        listing = run(project, db, "history").out
        assert "running" in listing and GONE not in listing, listing
        shown = run(project, db, "show", row["id"]).out
        assert shown.splitlines()[0] == f"run {row['id']}: running" and "  now in    long" in shown, shown
        assert json.loads(run(project, db, "history", "--json", "--failed").out) == []
        store = HistoryStore(db)
        live = store.run(row["id"])
        assert live is not None and run_summary(live)["label"] == "running" and not run_detail(live)["finished"]
        store.close()
        controller.send_signal(signal.SIGCONT)
        assert controller.wait(60) == 0
    finally:
        if controller.poll() is None:
            controller.send_signal(signal.SIGCONT)
            controller.kill()
            controller.wait()
    (row,) = json.loads(run(project, db, "history", "--json").out)
    assert row["label"] == "ok" and [t["task"] for t in row["tasks"]] == ["first", "long", "last"]


def test_an_exited_controller_is_gone_at_once_reaped_or_not(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.db")
    child = subprocess.Popen(["sleep", "60"])
    try:
        stamp = ControllerStamp(child.pid, start_ticks(child.pid), machine_key())
        store.start_run(RunRow(id="r1", started=time.time()), stamp)
        assert store.run("r1").result == "running"  # type: ignore[union-attr]
        child.kill()
        assert wait_for(lambda: start_ticks(child.pid) is None, 10)  # a zombie: exited, not reaped
        assert store.run("r1").result == GONE  # type: ignore[union-attr]  # with a fresh heartbeat
    finally:
        child.kill()
        child.wait()
    assert store.run("r1").result == GONE  # type: ignore[union-attr]
    store.close()


def test_rows_of_another_machine_and_rows_without_a_start_time_go_by_their_heartbeat(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.db")
    stale = time.time() - STALE_AFTER_S - 5
    here_no_ticks = ControllerStamp(os.getpid(), None, machine_key())  # this pid lives: it may be another's
    elsewhere = ControllerStamp(os.getpid(), start_ticks(os.getpid()), "another-boot/pid:[1]")
    for run_id, stamp in (("no-ticks", here_no_ticks), ("remote", elsewhere)):
        store.start_run(RunRow(id=run_id, started=stale), stamp)
        assert store.run(run_id).result == "running"  # type: ignore[union-attr]
        store.db.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (stale, run_id))  # type: ignore[union-attr]
        assert store.run(run_id).result == GONE  # type: ignore[union-attr]
    store.close()
