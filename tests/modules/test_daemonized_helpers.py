"""A launched job's helpers that daemonize themselves (fork, setsid, fork, the middle process
exits: the helper is reparented out of the job's tree) are still the job's: kill_old by pidfile
stops them with it, while the job runs, after it ended on its own, and after a later launch
from the same pidfile; a process that merely has the same command line is left alone.
Over local, ssh, the hostile wrappers and the container."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import pids_with, wait_for
from tests.modules.conftest import PlayRun, Target

#: The job: daemonizes `sleep MARKER` (a double fork), says so, then lives SECONDS more.
JOB = """\
import os, sys, time
marker, seconds = sys.argv[1], float(sys.argv[2])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", marker])
    os._exit(0)
os.wait()
print("helper daemonized", flush=True)
time.sleep(seconds)
"""


def _script(target: Target) -> Path:
    path = target.work / "daemonizing_job.py"
    path.write_text(JOB)
    return path


def _launch(target: Target, marker: str, seconds: float, pidfile: str = "job.pid") -> PlayRun:
    return target.play([{"name": "launch", "launch_detached": {
        "argv": [target.python, str(_script(target)), marker, str(seconds)],
        "log": str(target.work / "job.log"), "pidfile": str(target.work / pidfile)}, "timeout": 30}])


def _kill(target: Target, pidfile: str = "job.pid") -> PlayRun:
    return target.play([{"name": "kill", "kill_old": {"pidfile": str(target.work / pidfile), "grace": 2},
                         "timeout": 30}])


def _helper(target: Target, marker: str, job: int) -> tuple[int, int | None]:
    """(host pid, target pid) of the job's daemonized helper, once it runs out of the job's tree."""
    def found() -> list[int]:
        return [pid for pid in pids_with(marker) if pid != job
                and Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")]
    assert wait_for(lambda: len(found()) == 1, 10), pids_with(marker)
    (helper,) = found()
    assert wait_for(lambda: _ppid(helper) != job, 5)  # daemonized: out of the job's tree
    return helper, target.side.target_pid(helper)


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return 0


def test_kill_by_pidfile_stops_the_helpers_a_running_job_daemonized(target: Target, cleanup_marker: str) -> None:
    run = _launch(target, cleanup_marker, 1000)
    assert run.rc == 0, run.out
    job = target.host_pid(target.work / "job.pid")
    _, helper_there = _helper(target, cleanup_marker, job)
    # Another job whose command line is the helper's: it merely shares the name.
    other = target.play([{"name": "other", "launch_detached": {
        "argv": ["sleep", cleanup_marker], "pidfile": str(target.work / "other.pid")}}])
    assert other.rc == 0, other.out
    bystander = target.host_pid(target.work / "other.pid")
    bystander_there = int((target.work / "other.pid").read_text())
    # The helper is no process of the job's for verify: the pidfile's job counts as one.
    check = target.play([{"name": "verify", "verify": {"pidfile": str(target.work / "job.pid"), "processes": 1},
                          "timeout": 30}])
    assert check.rc == 0, check.out
    run = _kill(target)
    assert run.rc == 0, run.out
    killed = run.end("kill")["data"]["pids"]
    assert helper_there in killed, (killed, run.out)
    assert bystander_there not in killed
    assert wait_for(lambda: pids_with(cleanup_marker) == [bystander], 5), pids_with(cleanup_marker)
    record = json.loads((target.work / "job.exit").read_text())
    assert record["pid"] == int((target.work / "job.pid").read_text())  # the job's exit, not the helper's
    assert record["signal"] == 15
    assert _kill(target, "other.pid").rc == 0
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 5), pids_with(cleanup_marker)


def test_helpers_of_a_job_that_ended_are_stopped_by_the_next_kill(target: Target, cleanup_marker: str) -> None:
    run = _launch(target, cleanup_marker, 1)
    assert run.rc == 0, run.out
    job = target.host_pid(target.work / "job.pid")
    helper, helper_there = _helper(target, cleanup_marker, job)
    exit_file = target.work / "job.exit"
    assert wait_for(exit_file.exists, 10)  # written as the job exits, whatever its helper does
    record = json.loads(exit_file.read_text())
    assert record["pid"] == int((target.work / "job.pid").read_text())
    assert record["returncode"] == 0 and record["signal"] is None
    assert pids_with(cleanup_marker) == [helper]
    run = _kill(target)
    assert run.rc == 0, run.out
    assert run.end("kill")["status"] == "changed"
    assert run.end("kill")["data"]["pids"] == [helper_there]
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 5), pids_with(cleanup_marker)
    assert json.loads(exit_file.read_text()) == record  # the job's exit record stands


def test_helpers_of_an_ended_job_are_still_found_after_a_new_launch(target: Target, cleanup_marker: str) -> None:
    run = _launch(target, cleanup_marker, 1)
    assert run.rc == 0, run.out
    first = target.host_pid(target.work / "job.pid")
    _, helper_there = _helper(target, cleanup_marker, first)
    assert wait_for((target.work / "job.exit").exists, 10)
    run = _launch(target, cleanup_marker, 1000)  # the job is gone: a new one starts
    assert run.rc == 0, run.out
    second = target.host_pid(target.work / "job.pid")
    assert second != first
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 3, 10), pids_with(cleanup_marker)
    run = _kill(target)
    assert run.rc == 0, run.out
    assert helper_there in run.end("kill")["data"]["pids"]
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 5), pids_with(cleanup_marker)
