"""The records of unattended runs never lie.

Every exit of the controller closes its history row; a closed stdout stops output quietly and
never the run; a controller that dies without closing its row (SIGKILL, OOM, reboot) is shown
as aborted, never as running; history carries every task result; a history database that is
locked, corrupt or read-only never fails the play.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opsrunner.history.liveness import GONE, STALE_AFTER_S, ControllerStamp
from opsrunner.history.store import HistoryStore, RunRow
from tests.conftest import ROOT, kill_marked, pids_with, sleep_marker, wait_for, write_yaml
from tests.helpers import CliResult, cli_subprocess

TASKS = [{"name": f"step {i}", "command": "true"} for i in range(6)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}, "h2": {"connection": "local"}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "all", "gather_facts": False, "tasks": TASKS}])
    write_yaml(proj / "fails.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        *TASKS, {"name": "breaks", "fail": {"msg": "broken on purpose"}}]}])
    return proj


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "OPSRUNNER_HISTORY": str(db), "PYTHONPATH": str(ROOT)}


def run(project: Path, db: Path, *args: str) -> CliResult:
    return cli_subprocess(*args, cwd=project, env={"OPSRUNNER_HISTORY": str(db)})


def _piped_to_head(project: Path, db: Path, *args: str) -> tuple[int, str, str]:
    """`opsrunner ARGS | head -1`: the command's own exit status, what head printed, stderr."""
    command = " ".join([sys.executable, "-m", "opsrunner", *args])
    script = f"{command} 2>stderr.txt | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
    proc = subprocess.run(["bash", "-c", script], cwd=project, env=_env(db), capture_output=True, text=True,
                          timeout=120)
    lines = proc.stdout.splitlines()
    return int(lines[-1].removeprefix("rc=")), "\n".join(lines[:-1]), (project / "stderr.txt").read_text()


@pytest.mark.parametrize(("playbook", "code", "result"), [("ok.yml", 0, "ok (0)"), ("fails.yml", 2, "failed (2)")])
def test_a_closed_stdout_never_stops_the_run(project: Path, tmp_path: Path, playbook: str, code: int,
                                             result: str) -> None:
    db = tmp_path / "h.db"
    rc, shown, err = _piped_to_head(project, db, "play", playbook, "-i", "inv.yml")
    assert rc == code, err  # the play's exit code, not 250
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    (row,) = json.loads(run(project, db, "history", "--json").out)
    assert shown == f"run {row['id']} (opsrunner show {row['id']})"  # the first line: all that head let through
    assert row["exit_code"] == code and row["ended"] is not None  # closed, not `running`
    assert len(row["tasks"]) == 2 * (len(TASKS) + (playbook == "fails.yml"))  # the run went on to its end
    assert set(row["recap"]) == {"h1", "h2"}
    assert result in run(project, db, "history").out


def _file_size_limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # the history stays far below it


@pytest.mark.parametrize(("playbook", "code"), [("ok.yml", 0), ("fails.yml", 2)])
def test_output_to_a_full_file_never_stops_the_run(project: Path, tmp_path: Path, playbook: str, code: int) -> None:
    """stdout to a file that cannot take more (a file-size limit here, as a full disk):
    the run goes on to its end and its exit code, and stderr says from when output was lost."""
    db, log = tmp_path / "h.db", tmp_path / "out.log"
    log.write_bytes(b"." * ((1 << 20) - 200))  # room for the run's first line or two
    with log.open("ab") as out:
        proc = subprocess.run([sys.executable, "-m", "opsrunner", "play", playbook, "-i", "inv.yml"], cwd=project,
                              env=_env(db), stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                              preexec_fn=_file_size_limited)
    assert proc.returncode == code, proc.stderr  # the play's exit code, not 250
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "WARNING: the output could not be written from " in proc.stderr, proc.stderr
    assert log.stat().st_size <= 1 << 20
    (row,) = json.loads(run(project, db, "history", "--json").out)
    assert row["exit_code"] == code and row["ended"] is not None
    assert len(row["tasks"]) == 2 * (len(TASKS) + (playbook == "fails.yml"))  # the run went on to its end


def test_history_into_a_closed_pipe_exits_0_quietly(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    for _ in range(3):
        assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    rc, shown, err = _piped_to_head(project, db, "history", "-n", "100")
    assert rc == 0, err
    assert err == "", err
    assert shown.split()[:2] == ["RUN", "ID"]


def test_a_controller_killed_by_sigkill_is_shown_aborted_everywhere(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    token = sleep_marker()
    write_yaml(project / "long.yml", [{"hosts": "h1", "gather_facts": False, "tasks": [
        {"name": "first", "command": "true"}, {"name": "long", "command": f"sleep {token}"}]}])
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "long.yml", "-i", "inv.yml"],
                                  cwd=project, env=_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: bool(pids_with(token)), 60)
        # A finished task reaches the database within the writer's interval (0.2 s).
        assert wait_for(lambda: json.loads(run(project, db, "history", "--json").out)[0]["tasks"], 30)
        running = json.loads(run(project, db, "history", "--json").out)
        assert [r["result"] for r in running] == ["running"]  # alive: its pid is checked, not guessed
        controller.send_signal(signal.SIGKILL)
        controller.wait(30)
        listing = run(project, db, "history").out
        assert GONE in listing and "running" not in listing, listing
        assert listing.splitlines()[1].split()[-5] == "1"  # HOSTS: from its task rows, as it has no recap
        (row,) = json.loads(run(project, db, "history", "--json").out)
        assert row["result"] == GONE and row["exit_code"] is None
        assert [t["task"] for t in row["tasks"]] == ["first"]  # what it did before it died
        shown = run(project, db, "show", row["id"]).out
        assert shown.splitlines()[0] == f"run {row['id']}: {GONE}", shown
        assert "  was in    long\n" in shown  # the task it died in
        assert "(none: the run never reached its recap)" in shown
        failed = json.loads(run(project, db, "history", "--json", "--failed").out)
        assert [r["id"] for r in failed] == [row["id"]]  # an aborted run did not succeed
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_marked(token)


def test_a_controller_killed_under_strategy_free_names_each_hosts_task(project: Path, tmp_path: Path) -> None:
    """Under strategy free h2 has gone on to the second task while h1 is still in the first:
    the record of a controller killed then says both, each with its host (it named only the
    task started last, as if h1 were in it too)."""
    db = tmp_path / "h.db"
    first, second = sleep_marker(), sleep_marker()
    write_yaml(project / "free.yml", [{"hosts": "all", "gather_facts": False, "strategy": "free", "tasks": [
        {"name": "first", "command": f"{{{{ 'sleep {first}' if inventory_hostname == 'h1' else 'true' }}}}"},
        {"name": "second", "command": f"sleep {second}"}]}])
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "free.yml", "-i", "inv.yml"],
                                  cwd=project, env=_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: bool(pids_with(first)) and bool(pids_with(second)), 60)
        assert wait_for(lambda: json.loads(run(project, db, "history", "--json").out)[0]["tasks"], 30)
        assert wait_for(lambda: json.loads(run(project, db, "history", "--json").out)[0]["current_task"]
                        == "first (h1); second (h2)", 10)
        controller.send_signal(signal.SIGKILL)
        controller.wait(30)
        (row,) = json.loads(run(project, db, "history", "--json").out)
        assert row["result"] == GONE
        assert [(t["host"], t["task"]) for t in row["tasks"]] == [("h2", "first")]
        shown = run(project, db, "show", row["id"]).out
        assert "  was in    first (h1); second (h2)\n" in shown, shown
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_marked(first)
        kill_marked(second)


def test_a_row_of_another_controller_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    """Several controllers share one database: a row whose pid means nothing here is alive while
    its heartbeat is fresh and aborted once it is stale."""
    store = HistoryStore(tmp_path / "h.db")
    elsewhere = ControllerStamp(pid=os.getpid(), start_ticks=1, machine="another-boot/pid:[1]")
    store.start_run(RunRow(id="remote-run", started=time.time(), controller="ctl2"), elsewhere)
    (row,) = store.runs()
    assert row.result == "running"  # this pid is alive here, but the row is another machine's
    store.db.execute("UPDATE runs SET heartbeat = ? WHERE id = 'remote-run'", (time.time() - STALE_AFTER_S - 1,))
    (row,) = store.runs()
    assert row.result == GONE
    store.beat("remote-run")
    assert store.run("remote-run").result == "running"  # type: ignore[union-attr]


def test_history_json_carries_every_task_result(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    assert run(project, db, "play", "fails.yml", "-i", "inv.yml").rc == 2
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    newest, oldest = json.loads(run(project, db, "history", "--json").out)
    assert len(newest["tasks"]) == 12 and all(t["status"] == "changed" for t in newest["tasks"])
    (failed,) = [t for t in oldest["tasks"] if t["status"] == "failed"][:1]
    assert failed["task"] == "breaks" and failed["msg"] == "broken on purpose"
    assert {t["host"] for t in oldest["tasks"] if t["status"] == "failed"} == {"h1", "h2"}
    assert set(failed) >= {"host", "task", "status", "msg", "diagnosis"}


def test_logs_of_a_missing_log_is_an_error(project: Path, tmp_path: Path) -> None:
    write_yaml(project / "status.yml", [{"hosts": "h1", "gather_facts": False, "tasks": []}])
    res = run(project, tmp_path / "h.db", "logs", "-i", "inv.yml", "--log", str(tmp_path / "nonexistent"))
    assert res.rc == 2, res.out + res.err
    assert f"h1 | ERROR: no log at {tmp_path / 'nonexistent'}" in res.out


@contextlib.contextmanager
def _locked(db: Path) -> object:
    HistoryStore(db).close()
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield None
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextlib.contextmanager
def _immutable(db: Path) -> object:
    HistoryStore(db).close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.fail("chattr +i is needed to make a file read-only for root")
    try:
        yield None
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


@pytest.mark.parametrize("state", ["locked", "corrupt", "read-only"])
def test_a_bad_history_database_never_fails_the_play(project: Path, tmp_path: Path, state: str) -> None:
    db = tmp_path / "h.db"
    if state == "corrupt":
        db.write_bytes(b"this is not a database" * 100)
        context: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    else:
        context = _locked(db) if state == "locked" else _immutable(db)
    with context:
        res = run(project, db, "play", "ok.yml", "-i", "inv.yml")
    assert res.rc == 0, res.out + res.err
    assert "PLAY RECAP" in res.out and "failed=0" in res.out
    warnings = [ln for ln in res.err.splitlines() if ln.startswith("WARNING: run history not recorded in")]
    assert len(warnings) == 1 and str(db) in warnings[0], res.err
    cause = {"locked": "database is locked", "corrupt": "file is not a database",
             "read-only": "readonly database"}[state]
    assert cause in warnings[0], warnings
