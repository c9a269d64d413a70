"""The records a rollback keeps never cost a job: a release verdict that cannot be written
does not fail the verify that passed, and a hand rollback that cannot keep the running job's
launch (to start it again should it fail) refuses before it stops anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import kill_marked, wait_for
from tests.helpers import task_ends
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import Job, module_ends


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _block(path: Path) -> None:
    """Put a non-empty directory where a record file goes: no rename can replace it."""
    if path.exists():
        path.unlink()
    path.mkdir()
    (path / "keep").write_text("")


def test_a_verdict_that_cannot_be_written_does_not_fail_the_verify(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        release = job.good()["release"]
        _block(job.demo / "code" / "releases" / f"{release}.verdict.json")
        rc, out, events = job.play("restart_training.yml")  # the same code: the same release, relaunched
        assert rc == 0, out
        (verified,) = task_ends(events, "Verify the run is up (processes, log growing, no errors)")
        assert verified["status"] == "ok" and "recorded as the last good run" in verified["msg"]
        pid = target.host_pid(job.demo / "train.pid")
        assert wait_for(lambda: job.running() == [pid], 5)
        assert job.good()["pid"] == int((job.demo / "train.pid").read_text())
    finally:
        kill_marked(cleanup_marker)


def test_a_hand_rollback_that_cannot_keep_the_running_launch_stops_nothing(target: Target,
                                                                          cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        release = job.good()["release"]
        pid = target.host_pid(job.demo / "train.pid")
        _block(job.demo / "train.rollback-prior.json")
        rc, out, events = job.play("rollback.yml", "-e", f"release={release}")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert refused["msg"].startswith(
            f"rollback to release {release} (no git commit) failed: cannot keep the launch of the running job (pid "
            f"{(job.demo / 'train.pid').read_text().strip()}) to start it again should the rollback fail: "), refused
        assert refused["msg"].endswith("; nothing was stopped"), refused["msg"]
        assert job.running() == [pid]
    finally:
        kill_marked(cleanup_marker)
