"""rollback.yml's default target ("the release before current") is the newest release before
`current` that passed verify: never one a restart rolled back from, nor one never verified.
With none, it refuses and changes nothing. A release named by hand that is known to have
failed is gone to, with a warning."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import kill_marked, wait_for
from tests.modules.conftest import Target
from tests.modules.test_rb_restore import restart_with
from tests.modules.test_releases_rollback import BAD_RELEASES, Job, module_ends, process


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _verdict(job: Job, release: str) -> dict[str, object]:
    return dict(json.loads((job.demo / "code" / "releases" / f"{release}.verdict.json").read_text()))


def test_the_default_target_skips_a_release_that_failed_verify(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good1 = job.good()["release"]
        hang = restart_with(job, "hang", BAD_RELEASES["hangs"], rc=2)  # rolled back to good1
        good2 = restart_with(job, "good2")
        healthy = target.host_pid(job.demo / "train.pid")
        log_before = (job.demo / "train.log").stat().st_size

        rc, out, events = job.play("rollback.yml")
        assert rc == 0, out
        (done,) = module_ends(events, "rollback")
        assert done["msg"].startswith(f"rolled back to release {good1} (no git commit), pid "), done["msg"]
        pid = target.host_pid(job.demo / "train.pid")
        assert pid != healthy and wait_for(lambda: job.running() == [pid], 5)
        assert process(pid)[2] == f"{job.demo}/code/releases/{good1}"
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good1}"
        assert job.good()["release"] == good1
        # The hanging release was never started again: this run's part of the log is good1's only.
        assert "hanging (simulated)" not in (job.demo / "train.log").read_bytes()[log_before:].decode()
        # Each release's verdict, beside it: what the default target was chosen by.
        assert _verdict(job, hang)["state"] == "failed" and "hung" in str(_verdict(job, hang)["why"])
        assert _verdict(job, good2)["state"] == "passed" and _verdict(job, good1)["state"] == "passed"

        # Named by hand, a release known to have failed is gone to, with a warning; it fails
        # again, and what ran before (good1) is started again.
        rc, out, events = job.play("rollback.yml", "-e", f"release={hang}")
        assert rc == 2, out
        (named,) = module_ends(events, "rollback")
        assert f" (warning: release {hang} was known to have failed: failed at " in named["msg"], named["msg"]
        assert any(f"release {hang} was recorded as failed" in w for w in named.get("warnings", [])), named
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good1}"
        assert len(job.running()) == 1 and process(job.running()[0])[2] == f"{job.demo}/code/releases/{good1}"
    finally:
        kill_marked(cleanup_marker)


def test_with_no_verified_release_before_current_it_refuses_and_changes_nothing(target: Target,
                                                                                cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        job.write_src("crash", BAD_RELEASES["crashes"])
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "crash"))
        assert rc == 2, out  # no last good run: no rollback, the release was never verified
        crash = module_ends(events, "deploy_code")[0]["data"]["release"]
        good = restart_with(job, "good1")
        pid = target.host_pid(job.demo / "train.pid")

        for args in (["--check"], []):
            rc, out, events = job.play("rollback.yml", *args)
            assert rc == 2, out
            (refused,) = module_ends(events, "rollback")
            assert refused["msg"] == (
                f"rollback failed: no release before the current one ({good}) passed verify, so there is none to "
                f"go back to ({crash} was never verified); nothing was stopped. Name the release to go to "
                "(release=NAME) to start one anyway"), refused["msg"]
            assert job.running() == [pid]
            assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"
    finally:
        kill_marked(cleanup_marker)
