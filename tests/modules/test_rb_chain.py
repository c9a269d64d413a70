"""A rollback behind a wrapper chain whose exec session ends what it leaves behind (a PID
namespace or cgroup per session, as some container hops do) must not be reported as rolled
back and verified, nor recorded as the last good run: its relaunch (and a hand rollback's
restart of what ran before) gets an exec session of its own, ended at once, and the run's
own session then looks for the job. The release is not recorded as failed for it: the chain
ended the job, not its code."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REAPER, TRAINER, kill_marked, wait_for
from tests.lxc import TargetSide
from tests.modules.conftest import Target
from tests.modules.test_launch_session_teardown import TREE_REAPER
from tests.modules.test_rb_restore import restart_with
from tests.modules.test_releases_rollback import Job, module_ends


@pytest.fixture
def target(tmp_path: Path) -> Target:
    """This machine, with the chain added for the rollback only (the restarts before it run
    without one: the chain here would end their launches too)."""
    work = tmp_path / "work"
    work.mkdir()
    return Target({"connection": "local"}, TargetSide(sys.executable, TRAINER, work))


def _two_releases(job: Job) -> tuple[str, str, int]:
    """Release A then release B restarted and verified without a chain: (A, B, B's pid)."""
    assert job.play("restart_training.yml")[0] == 0
    first = job.good()["release"]
    second = restart_with(job, "second")
    assert job.good()["release"] == second != first
    return first, second, job.target.host_pid(job.demo / "train.pid")


def test_a_rollback_the_chain_ends_is_a_failure_not_a_verified_run(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        first, second, pid = _two_releases(job)
        good_before = job.good()
        target.host_vars["wrapper"] = [TREE_REAPER]
        rc, out, events = job.play("rollback.yml", "-e", f"release={first}")
        assert rc == 2, out
        (line,) = module_ends(events, "rollback")
        msg = line["msg"]
        assert msg.startswith(f"rollback to release {first} (no git commit) failed: started pid "), msg
        assert "but it was gone once its exec session ended: the wrapper chain (" in msg and "tree_reaper.py" in msg
        # the hand rollback put back what ran before, through the same chain: gone too, and said so
        assert f"; starting what ran before (release {second} (no git commit)) again failed: started pid " in msg
        assert msg.endswith("; nothing is running"), msg
        assert "verified" not in msg.split(";")[0]
        # the truth on the target: nothing of the job runs, the record is not a dead relaunch's,
        # and release A is not marked failed (its code did not fail; the chain ended it)
        assert wait_for(lambda: job.running() == [], 5), job.running()
        assert pid not in job.running()
        assert job.good()["pid"] == good_before["pid"]
        verdict = job.demo / "code" / "releases" / f"{first}.verdict.json"
        assert not verdict.exists() or json.loads(verdict.read_text())["state"] != "failed", verdict.read_text()
        assert os.readlink(job.demo / "code" / "current") == f"releases/{second}"
    finally:
        kill_marked(cleanup_marker)


def test_a_rollback_that_outlives_its_session_is_verified_and_runs_after_the_run(target: Target,
                                                                               cleanup_marker: str) -> None:
    """Through a hop that ends only its own session's processes (the job has a session of
    its own), the rollback's relaunch lives on after the run, as the verify said."""
    job = Job(target, cleanup_marker)
    try:
        first, _, _ = _two_releases(job)
        target.host_vars["wrapper"] = [REAPER]
        rc, out, events = job.play("rollback.yml", "-e", f"release={first}")
        assert rc == 0, out
        (line,) = module_ends(events, "rollback")
        assert line["msg"].startswith(f"rolled back to release {first} (no git commit), pid "), line["msg"]
        pid = job.target.host_pid(job.demo / "train.pid")
        assert job.good()["pid"] == pid and job.good()["release"] == first
        assert wait_for(lambda: job.running() == [pid], 5), job.running()
    finally:
        kill_marked(cleanup_marker)


#: Release code that, once the flag file is there, exits by itself with code 3 after 0.4 s:
#: after the rollback's launch has stopped watching it (0.25 s), before its session ends.
EXITS_LATER_WHEN_FLAGGED = (
    "def main(argv=None):\n",
    "def main(argv=None):\n    if os.path.exists(os.environ['RUN_FLAG']):\n"
    "        __import__('time').sleep(0.4)\n        raise SystemExit(3)\n")
#: A layer whose session ends 1.5 s after the agent's (within the 2 s the run waits for a
#: session's end): a job that exits by itself meanwhile is gone when the run looks, as one the
#: chain ended is.
SLOW_TO_END = "sh -c '\"$@\"; s=$?; sleep 1.5; exit $s' sh"


def test_a_relaunch_that_exits_by_itself_before_its_session_ends_is_its_failure_not_the_chains(
        target: Target, cleanup_marker: str) -> None:
    """The rollback's relaunch exits with code 3 after its launch stopped watching and before
    its own session ended: its exit record says so. It is told as the job's own exit (and its
    release recorded as failed), not blamed on the chain, which ended nothing of it. What ran
    before, started again through the same chain, is ended by the chain: that is said as such."""
    job = Job(target, cleanup_marker)
    flag = target.work / "fail-now"
    job.vars["train_env"] = {**job.vars["train_env"], "RUN_FLAG": str(flag)}
    try:
        assert job.play("restart_training.yml")[0] == 0
        first = restart_with(job, "later", EXITS_LATER_WHEN_FLAGGED)
        second = restart_with(job, "second")
        flag.touch()
        target.host_vars["wrapper"] = [TREE_REAPER, SLOW_TO_END]
        rc, out, events = job.play("rollback.yml", "-e", f"release={first}")
        assert rc == 2, out
        (line,) = module_ends(events, "rollback")
        msg = line["msg"]
        assert msg.startswith(f"rollback to release {first} (no git commit) failed: the relaunched job (pid "), msg
        assert ") exited at once with code 3; " in msg.split(";")[0] + "; ", msg
        assert "gone once its exec session ended" not in msg.split("; starting what ran before")[0], msg
        # what ran before (release `second`, which runs until stopped) is ended by the chain: said so
        assert f"; starting what ran before (release {second} (no git commit)) again failed: started pid " in msg
        assert "but it was gone once its exec session ended: the wrapper chain (" in msg, msg
        verdict = job.demo / "code" / "releases" / f"{first}.verdict.json"
        assert json.loads(verdict.read_text())["state"] == "failed", verdict.read_text()
        assert wait_for(lambda: job.running() == [], 5), job.running()
    finally:
        kill_marked(cleanup_marker)
