"""A rollback whose task timeout comes while it verifies the relaunched run says it ran out
of time, and in what state it left the job: running, not verified, not recorded as the last
good run (not "failed verify: running: ...")."""

from __future__ import annotations

import os

import pytest

from tests.conftest import kill_marked, wait_for
from tests.helpers import task_ends
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import BAD_RELEASES, FAIL, ROLL_BACK, Job, process


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def test_a_rollback_cut_short_by_its_timeout_says_so_and_leaves_the_run_running(target: Target,
                                                                                cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()
        job.write_src("crash", BAD_RELEASES["crashes"])
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "crash"), rollback_timeout=4,
                                   verify_stable_for=10)
        assert rc == 2, out
        (rolled,) = task_ends(events, ROLL_BACK)
        assert rolled["status"] == "timed_out", rolled
        pid = int((job.demo / "train.pid").read_text())
        line = rolled["data"]["summary"]
        assert line.startswith("Verify the run is up (processes, log growing, no errors) failed: the job (pid "), line
        assert (f"; rollback to release {good['release']} (no git commit) ran out of time: the task's timeout (4s) "
                "came ") in line, line
        assert (f"s into verifying the relaunched run (pid {pid}), before its checks could pass for long enough; it "
                "is running, not verified (not recorded as the last good run); current -> "
                f"{good['release']}. Give the rollback more time") in line, line
        assert "failed verify" not in line.split("; rollback to")[1]
        (fail,) = task_ends(events, FAIL)
        assert fail["msg"] == line

        host_pid = target.host_pid(job.demo / "train.pid")
        assert wait_for(lambda: job.running() == [host_pid], 5)
        assert process(host_pid)[2] == good["release_dir"]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good['release']}"
        assert job.good()["pid"] == good["pid"]  # not recorded: it was not verified
    finally:
        kill_marked(cleanup_marker)
