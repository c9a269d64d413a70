"""A rollback to a release when the last good run was a plain deploy's (not launched through
<dest>/current) gives the true reason it cannot go there (not "there is no release"), and
stops nothing."""

from __future__ import annotations

import os

import pytest

from tests.conftest import kill_marked
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import Job, module_ends


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def test_a_release_after_a_plain_last_good_run_names_the_true_reason(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        release = job.good()["release"]
        job.vars.update(releases=False, train_chdir=str(job.demo),
                        train_command=f"{target.python} -u {job.demo}/code/train.py --run-name {cleanup_marker} "
                                      f"--step-time 0.05 --checkpoint {job.demo}/ck.json")
        rc, out, _ = job.play("restart_training.yml")
        assert rc == 0, out
        good = job.good()
        assert good["release"] is None
        pid = target.host_pid(job.demo / "train.pid")
        assert (job.demo / "code" / "releases" / release).is_dir()

        for extra, what in ((["-e", f"release={release}"], f"release {release!r}"), ([], "the previous release")):
            rc, out, events = job.play("rollback.yml", "-e", "releases=true", *extra)
            assert rc == 2, out
            (refused,) = module_ends(events, "rollback")
            assert refused["msg"].startswith(
                f"rollback failed: cannot roll back to {what}: the last good run (pid {good['pid']}, verified at "
            ), refused["msg"]
            assert f") was launched from a plain deploy, not from a release ({good['argv'][0]} -u " in refused["msg"]
            assert "), so there is no release launch to start it with: " in refused["msg"]
            assert "there is no release '" not in refused["msg"]
            assert job.running() == [pid]
            assert not os.path.lexists(job.demo / "code" / "current")  # removed by the plain deploy
    finally:
        kill_marked(cleanup_marker)
