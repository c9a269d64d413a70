"""The shipped restart checks that the new run can start before it stops the old one: a launch
that cannot start (a log path under a regular file, a program that is not there, a chdir that
is missing) fails the restart with the reason while the old run keeps running, the same pid,
whether or not a rollback is on or a good run is recorded; `--tags stop` alone still stops
the job whatever the launch's settings. Over ssh through the longest hostile wrapper chain."""

from __future__ import annotations

import os

import pytest

from tests.conftest import kill_marked
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import Job, module_ends

CHECK = "Check the new run can start before the old one is stopped"
STOP = "Stop the old run and confirm it is gone"
FAIL = "Fail the restart (what failed, and the rollback)"


@pytest.fixture
def target(chain_target: Target) -> Target:
    return chain_target


def _good_run(job: Job) -> int:
    """The role's first restart, verified (the last good run); its pid, as the target names it."""
    rc, out, _ = job.play("restart_training.yml")
    assert rc == 0, out
    assert job.running() == [job.target.host_pid(job.demo / "train.pid")]
    return int((job.demo / "train.pid").read_text())


def _a_job_not_recorded_good(job: Job) -> int:
    """A good run, then a restart whose verify did not run (--skip-tags verify): the job that
    runs now is not the recorded last good run. Its pid, as the target names it."""
    good_pid = _good_run(job)
    rc, out, _ = job.play("restart_training.yml", "--skip-tags", "verify")
    assert rc == 0, out
    pid = int((job.demo / "train.pid").read_text())
    assert pid != good_pid and job.good()["pid"] == good_pid
    return pid


def _left_running(job: Job, pid: int, out: str, events: list[dict[str, object]]) -> None:
    """The old run (`pid` on the target) still runs, as the pidfile says, and nothing stopped it."""
    assert int((job.demo / "train.pid").read_text()) == pid
    host_pid = job.target.host_pid(job.demo / "train.pid")
    assert job.running() == [host_pid], out
    os.kill(host_pid, 0)
    assert [e["status"] for e in events if e["event"] == "task_end" and e["task"] == STOP] == []
    assert "killed 1" not in out
    [fail] = [e for e in events if e["event"] == "task_end" and e["task"] == FAIL]
    assert f"the new run could not start, so the old run (pid {pid}) was left running" in str(fail["msg"]), out


def test_a_bad_log_path_leaves_the_old_run_running(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        pid = _good_run(job)
        good_release = job.good()["release"]
        job.write_src("v2", ("def main(argv=None):\n", "def main(argv=None):  # v2\n"))
        (target.work / "afile").write_text("a file, not a folder\n")
        bad = f"{target.work}/afile/logs/train.log"
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "v2"), log_path=bad)
        assert rc == 2, out
        (check,) = [e for e in events if e["event"] == "task_end" and e["task"] == CHECK]
        assert check["status"] == "failed"
        assert check["msg"] == f"cannot open the log {bad}: directory {target.work}/afile is not a directory"
        assert f"{CHECK} failed: cannot open the log {bad}: directory {target.work}/afile is not a directory" in out
        _left_running(job, pid, out, events)
        (rollback,) = module_ends(events, "rollback")
        assert (f"no rollback needed: the last good run (release {good_release} (no git commit), pid {pid}) is "
                "still running; nothing was stopped; current switched back from ") in rollback["msg"], out
        assert (job.demo / "code" / "current").resolve().name == good_release  # the next launch is the good code
        assert (target.work / "afile").read_text() == "a file, not a folder\n"
    finally:
        kill_marked(cleanup_marker)


def test_a_bad_program_leaves_the_old_run_running_with_the_rollback_off(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        pid = _good_run(job)
        rc, out, events = job.play("restart_training.yml", rollback_on_failure=False,
                                   train_command=f"trian-no-such-program --run-name {cleanup_marker}",
                                   train_env={"PATH": "/usr/bin:/bin"})
        assert rc == 2, out
        why = "program trian-no-such-program not found on the target (searched PATH=/usr/bin:/bin)"
        assert f"{CHECK} failed: {why}" in out
        _left_running(job, pid, out, events)
        assert "no rollback: it is off (rollback_on_failure: false)" in out
    finally:
        kill_marked(cleanup_marker)


def test_a_missing_chdir_leaves_the_old_run_running_with_no_good_run_recorded(
        target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        pid = _good_run(job)
        (job.demo / "train.good.json").unlink()  # as on a first restart of a job started otherwise
        missing = f"{target.work}/no-such-dir"
        rc, out, events = job.play("restart_training.yml", train_chdir=missing)
        assert rc == 2, out
        assert f"{CHECK} failed: chdir {missing} does not exist on the target" in out
        _left_running(job, pid, out, events)
        assert "no rollback: no last good run is recorded for this job" in out
    finally:
        kill_marked(cleanup_marker)


def test_tags_stop_alone_stops_the_job_whatever_the_launch_settings(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        pid = _good_run(job)
        (target.work / "afile").write_text("x")
        rc, out, events = job.play("restart_training.yml", "--tags", "stop", log_path=f"{target.work}/afile/t.log",
                                   train_command="trian-no-such-program")
        # A stop alone leaves no run to verify: the verify (tagged always) skips itself, and the run succeeds.
        assert rc == 0 and f"{CHECK} failed" not in out, out
        assert [e["status"] for e in events if e["event"] == "task_end" and e["task"] == CHECK] == ["skipped"]
        assert [e["status"] for e in events if e["event"] == "task_end" and e["task"].startswith("Verify the run is up")
                ] == ["skipped"], out
        assert f"killed 1: {pid}" in out
        assert job.running() == []
    finally:
        kill_marked(cleanup_marker)


def test_a_running_job_that_is_not_the_good_run_is_left_running_too(target: Target, cleanup_marker: str) -> None:
    """The job that runs was started by a restart whose verify did not run (--skip-tags
    verify: not the recorded last good run). A failed check must not make the rescue stop it
    and start the last good run in its place: nothing was launched, so nothing is stopped."""
    job = Job(target, cleanup_marker)
    try:
        pid = _a_job_not_recorded_good(job)
        missing = f"{target.work}/no-such-dir"
        rc, out, events = job.play("restart_training.yml", train_chdir=missing)
        assert rc == 2, out
        assert f"{CHECK} failed: chdir {missing} does not exist on the target" in out
        _left_running(job, pid, out, events)
        (rollback,) = module_ends(events, "rollback")
        assert f"no rollback: the job that runs (pid {pid}) was left running; nothing was stopped" in rollback["msg"]
    finally:
        kill_marked(cleanup_marker)


def test_a_failed_deploy_leaves_a_running_job_that_is_not_the_good_run_running(
        target: Target, cleanup_marker: str) -> None:
    """A deploy that fails has stopped nothing: the rescue leaves the job that runs running,
    whether or not it is the recorded last good run."""
    job = Job(target, cleanup_marker)
    try:
        pid = _a_job_not_recorded_good(job)
        (target.work / "afile").write_text("a file, not a folder\n")
        rc, out, events = job.play("restart_training.yml", code_dest=f"{target.work}/afile/code")
        assert rc == 2, out
        assert [e["status"] for e in events if e["event"] == "task_end" and e["task"] == STOP] == []
        host_pid = job.target.host_pid(job.demo / "train.pid")
        assert int((job.demo / "train.pid").read_text()) == pid and job.running() == [host_pid], out
        (rollback,) = module_ends(events, "rollback")
        assert f"no rollback: the job that runs (pid {pid}) was left running; nothing was stopped" in rollback["msg"]
    finally:
        kill_marked(cleanup_marker)
