"""When fail_regex matches, verify waits a bounded grace for the job to exit before diagnosing it.

The line can appear while the job is still writing its traceback: judged at that instant, a
crashing job was "running" on a busy machine and "exited with code 1" on an idle one. Here the
job takes a whole second between the line and its exit, far more than any load adds.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from tests.conftest import sleep_marker
from tests.modules.conftest import Target

#: Comes up (the checks pass), then logs a traceback and takes 1 s more to exit with code 3.
SLOW_CRASH = ("echo ready; for i in 1 2 3 4 5 6 7 8; do echo step $i; sleep 0.2; done; "
              "echo 'Traceback (most recent call last):'; sleep 1; echo 'ValueError: boom'; exit 3")


def _run(target: Target, script: str, **verify: object) -> tuple[int, dict[str, object], str, str]:
    log, pidfile = str(target.work / "t.log"), str(target.work / "t.pid")
    args = {"pidfile": pidfile, "processes": 1, "log": log, "log_not_regex": "Traceback", "within": 10,
            "stable_for": 10, **verify}
    run = target.play([{"name": "launch", "launch_detached": {"argv": ["sh", "-c", script], "log": log,
                                                              "pidfile": pidfile}},
                       {"name": "verify", "verify": args, "timeout": 60}])
    pid = Path(pidfile).read_text().split()[0] if Path(pidfile).exists() else ""
    return run.rc, run.end("verify"), run.out, pid


def _kill(target: Target, pid: str) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError, LookupError):
            os.kill(target.side.host_pid(int(pid)), signal.SIGKILL)


def test_a_crash_still_writing_its_traceback_is_diagnosed_by_its_exit_code(edge_target: Target) -> None:
    rc, end, out, pid = _run(edge_target, SLOW_CRASH)
    try:
        assert rc == 2, out
        assert f"diagnosis: the job (pid {pid}) exited with code 3" in end["msg"], end["msg"]
        assert end["data"]["state"] == "exited 3"
        assert "ValueError: boom" in end["msg"]  # the log tail is read after the exit, whole
    finally:
        _kill(edge_target, pid)


def test_a_job_alive_after_the_grace_is_reported_running_with_the_matching_line(edge_target: Target) -> None:
    token = sleep_marker()
    script = f"echo ready; sleep 0.5; echo 'Traceback: a warning the job survives'; exec sleep {token}"
    rc, end, out, pid = _run(edge_target, script, fail_grace=1.5)
    try:
        assert rc == 2, out
        assert (f"diagnosis: running: the job (pid {pid}) is still running 1.5s after its log matched "
                "/Traceback/: Traceback: a warning the job survives") in end["msg"], end["msg"]
        assert end["data"]["state"] == "running"
        # Not the stable window's 10 s: the match is final, and the grace bounded the wait.
        assert end["duration_s"] < 10, end["duration_s"]
    finally:
        _kill(edge_target, pid)
