"""A verify that names a pidfile and states no process count requires the pidfile's job
running: it said "all checks passed" about a job that had exited or never started (and, with
record_good, recorded nothing without a word). `processes: 0` requires it stopped."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.conftest import wait_for
from tests.modules.conftest import PlayRun, Target


def _verify(target: Target, **args: object) -> PlayRun:
    return target.play([{"name": "verify", "verify": args, "timeout": 60}])


def _launch(target: Target, pid: str, log: str, **how: object) -> PlayRun:
    return target.play([{"name": "launch", "launch_detached": {**how, "log": log, "pidfile": pid}}])


def test_a_job_that_exited_fails_with_its_exit_code(edge_target: Target) -> None:
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    assert _launch(target, pid, log, command="sh -c 'echo started; exit 3'").rc == 2  # exits at once
    job = json.loads((target.work / "q.exit").read_text())["pid"]
    for record_good in (False, True):
        run = _verify(target, pidfile=pid, log=log, record_good=record_good)
        end = run.end("verify")
        assert run.rc == 2, run.out
        assert "all checks passed" not in run.out
        assert end["msg"].startswith(f"job: expected running (the pid in {pid}), got not running\n"), end["msg"]
        assert f"diagnosis: the job (pid {job}) exited with code 3, " in end["msg"]
        assert "  | started" in end["msg"]  # the log's last lines
        assert not (target.work / "q.good.json").exists()
    stopped = _verify(target, pidfile=pid, log=log, processes=0)  # says it must be stopped: it is
    assert stopped.rc == 0, stopped.out
    assert stopped.end("verify")["msg"].startswith("all checks passed: processes=0, log_exists=exists\nexited 3")


def test_a_job_that_never_started_fails_saying_why(edge_target: Target) -> None:
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    launched = _launch(target, pid, log, argv=["trian-no-such-program"])
    assert launched.rc == 2 and "not found on the target" in launched.end("launch")["msg"]
    run = _verify(target, pidfile=pid, log=log, within=30)
    msg = run.end("verify")["msg"]
    assert run.rc == 2, run.out
    assert "job: expected running" in msg and "got not running" in msg
    assert "diagnosis: never started: the launch at " in msg and "program trian-no-such-program not found" in msg
    assert run.end("verify")["duration_s"] < 10  # final at once, not after within=30


def test_a_running_job_passes_and_fails_once_killed(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    assert _launch(target, pid, log, command=target.trainer_command(cleanup_marker, target.work / "ck.json")).rc == 0
    job = int(Path(pid).read_text())
    for extra in ({}, {"pattern": cleanup_marker}):
        run = _verify(target, pidfile=pid, log=log, log_regex="ready: training", within=20, record_good=True,
                      **extra)
        assert run.rc == 0, run.out
        assert run.end("verify")["msg"].startswith("all checks passed: job=running, log_exists=exists, log_regex=")
        assert "recorded as the last good run" in run.end("verify")["msg"]
    os.kill(target.host_pid(Path(pid)), signal.SIGKILL)
    assert wait_for((target.work / "q.exit").exists, 5)
    for extra in ({}, {"pattern": cleanup_marker}):
        run = _verify(target, pidfile=pid, log=log, **extra)
        assert run.rc == 2, run.out
        assert f"diagnosis: the job (pid {job}) was killed by signal 9 (SIGKILL)" in run.end("verify")["msg"]


def test_a_pass_that_records_nothing_says_so(edge_target: Target) -> None:
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    assert _launch(target, pid, log, command="sh -c 'exit 0'").rc == 0  # ended at once, code 0
    run = _verify(target, pidfile=pid, log=log, processes=0, record_good=True)
    end = run.end("verify")
    assert run.rc == 0, run.out
    assert end["warnings"] == ["record_good: nothing was recorded as the last good run: the pidfile names no "
                               "running job started by launch_detached"]
    assert not (target.work / "q.good.json").exists()


def test_a_pidfile_alone_is_a_check_that_its_job_runs(edge_target: Target, cleanup_marker: str) -> None:
    """`verify: {pidfile: x}` states "the job of this pidfile is running": it was refused as
    no check at all (exit 4) though the verdict checks just that."""
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    assert _launch(target, pid, log, command=target.trainer_command(cleanup_marker, target.work / "ck.json")).rc == 0
    job = int(Path(pid).read_text())
    run = _verify(target, pidfile=pid)
    assert run.rc == 0, run.out
    assert run.end("verify")["msg"].startswith(f"all checks passed: job=running\nrunning, pid {job}, up "), run.out
    os.kill(target.host_pid(Path(pid)), signal.SIGKILL)
    assert wait_for((target.work / "q.exit").exists, 5)
    run = _verify(target, pidfile=pid)
    msg = run.end("verify")["msg"]
    assert run.rc == 2, run.out
    assert msg.startswith(f"job: expected running (the pid in {pid}), got not running\n"), msg
    assert f"diagnosis: the job (pid {job}) was killed by signal 9 (SIGKILL)" in msg, msg


def test_a_pidfile_alone_fails_on_a_job_that_exited(edge_target: Target) -> None:
    target = edge_target
    log, pid = str(target.work / "q.log"), str(target.work / "q.pid")
    assert _launch(target, pid, log, command="sh -c 'echo started; exit 3'").rc == 2  # exits at once
    job = json.loads((target.work / "q.exit").read_text())["pid"]
    run = _verify(target, pidfile=pid, within=30)
    msg = run.end("verify")["msg"]
    assert run.rc == 2, run.out
    assert msg.startswith(f"job: expected running (the pid in {pid}), got not running\n"), msg
    assert f"diagnosis: the job (pid {job}) exited with code 3, " in msg, msg
    assert run.end("verify")["duration_s"] < 10  # final at once, not after within=30
