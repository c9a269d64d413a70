"""Plain deploys and release deploys to one code_dest, then a release that fails and is rolled
back to a plain deploy's last good run: what runs is the plain code, so `current` is removed
rather than left on the failed release (which would read as the running code, and be the next
deploy's base and "previous"), and the rollback's line and the history say so."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kill_marked, wait_for
from tests.helpers import task_ends
from tests.modules.conftest import Target, _target_for
from tests.modules.test_releases_rollback import BAD_RELEASES, FAIL, ROLL_BACK, Job, module_ends, process


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


@pytest.fixture
def local_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


def _plain(job: Job, target: Target, marker: str) -> dict[str, Any]:
    """The role's vars for a plain deploy into code_dest, run from there (not through current)."""
    return dict(releases=False, train_chdir=str(job.demo),
                train_command=f"{target.python} -u {job.demo}/code/train.py --run-name {marker} "
                              f"--step-time 0.05 --checkpoint {job.demo}/ck.json")


def _restart_plain(job: Job, target: Target, marker: str) -> None:
    releases = {k: job.vars[k] for k in ("releases", "train_chdir", "train_command")}
    job.vars.update(_plain(job, target, marker))
    rc, out, _ = job.play("restart_training.yml")
    assert rc == 0, out
    assert job.good()["release"] is None
    job.vars.update(releases)


def _removed(job: Job, failed: str) -> str:
    return (f"; current removed ({job.demo}/code/current pointed to release {failed}, which is not what runs: "
            "the last good run is a plain deploy's, not a release's)")


def _failing_release(job: Job, *args: str) -> tuple[str, str, list[dict[str, Any]]]:
    """A release that crashes after a few steps, restarted: (its name, the output, events)."""
    time.sleep(1.1)  # another second: another release name
    job.write_src("crash", BAD_RELEASES["crashes"])
    rc, out, events = job.play("restart_training.yml", *args, code_src=str(job.src / "crash"))
    assert rc == 2, out
    (deploy,) = module_ends(events, "deploy_code")
    return str(deploy["data"]["release"]), out, events


def _plain_code_runs(job: Job, target: Target) -> int:
    """The one job runs the plain deploy's code (code/train.py, in demo), as its good run."""
    pid = target.host_pid(job.demo / "train.pid")
    assert wait_for(lambda: job.running() == [pid], 5), (job.running(), pid)
    argv, _, cwd = process(pid)
    good = job.good()
    assert good["release"] is None and good["pid"] == int((job.demo / "train.pid").read_text())  # the target's pid
    assert argv == good["argv"] and argv[2] == f"{job.demo}/code/train.py" and cwd == str(job.demo)
    return pid


@pytest.mark.parametrize("first_release", [True, False], ids=["release-plain-release", "plain-release"])
def test_a_rollback_to_a_plain_deploy_removes_current(target: Target, cleanup_marker: str,
                                                      first_release: bool) -> None:
    job = Job(target, cleanup_marker)
    job.vars["keep_releases"] = 1
    link = job.demo / "code" / "current"
    try:
        if first_release:
            assert job.play("restart_training.yml")[0] == 0
            good_release = job.good()["release"]
        _restart_plain(job, target, cleanup_marker)
        if first_release:  # a plain deploy leaves the releases, and removes current: it runs from code_dest
            assert not os.path.lexists(link) and (job.demo / "code" / "releases" / good_release).is_dir()

        failed, out, events = _failing_release(job)
        (fail,) = task_ends(events, FAIL)
        assert fail["msg"].endswith(
            "; rolled back to the last good run's launch (no release: the code deployed in place stays), pid "
            f"{(job.demo / 'train.pid').read_text().strip()}, verified{_removed(job, failed)}"), fail["msg"]
        (rolled,) = task_ends(events, ROLL_BACK)
        assert rolled["data"]["unlinked"] == str(link) and rolled["data"]["switched_from"] == failed
        assert not os.path.lexists(link)
        _plain_code_runs(job, target)
        assert (job.demo / "code" / "releases" / failed).is_dir()  # the releases themselves stay
        rows = {t["task"]: t for t in job.last_run()["tasks"]}
        assert rows[ROLL_BACK]["msg"].splitlines()[0] == fail["msg"] == rows[FAIL]["msg"]

        # The next release is made whole, from no "previous": not on top of the failed one.
        time.sleep(1.1)
        rc, out, events = job.play("restart_training.yml")
        assert rc == 0, out
        (deploy,) = module_ends(events, "deploy_code")
        assert deploy["data"]["previous"] is None and " hard-linked from " not in deploy["msg"], deploy
        assert os.readlink(link) == f"releases/{deploy['data']['release']}" == f"releases/{job.good()['release']}"
    finally:
        kill_marked(cleanup_marker)


def test_a_rollback_by_hand_to_a_plain_deploy_says_it_removes_current(local_target: Target,
                                                                      cleanup_marker: str) -> None:
    target = local_target
    job = Job(target, cleanup_marker)
    link = job.demo / "code" / "current"
    try:
        _restart_plain(job, target, cleanup_marker)
        failed, _, events = _failing_release(job, "-e", "rollback_on_failure=false")
        assert task_ends(events, FAIL)[0]["msg"].endswith("; no rollback: it is off (rollback_on_failure: false)")
        assert os.readlink(link) == f"releases/{failed}"

        rc, out, events = job.play("rollback.yml", "--check", "-e", "releases=false")
        assert rc == 0, out
        (dry,) = module_ends(events, "rollback")
        assert dry["msg"].startswith("would roll back to the last good run's launch (no release: the code deployed "
                                     f"in place stays): stop nothing running, remove current ({link} points to "
                                     f"release {failed}), start "), dry["msg"]
        assert os.readlink(link) == f"releases/{failed}"

        rc, out, events = job.play("rollback.yml", "-e", "releases=false")
        assert rc == 0, out
        (done,) = module_ends(events, "rollback")
        pid = _plain_code_runs(job, target)
        line = done["msg"].splitlines()[0]
        assert line == ("rolled back to the last good run's launch (no release: the code deployed in place "
                        f"stays), pid {pid}, verified{_removed(job, failed)}"), done["msg"]
        assert not os.path.lexists(link)
    finally:
        kill_marked(cleanup_marker)
