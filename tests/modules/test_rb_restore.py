"""A hand rollback whose own target fails starts what was running before it again (its
recorded launch, from the release `current` is switched back to) and verifies it; the line
says what runs now, and plainly that nothing runs when that fails too."""

from __future__ import annotations

import os
import time

import pytest

from tests.conftest import kill_marked, wait_for
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import BAD_RELEASES, Job, module_ends, process

#: good2's trainer exits at once with code 1 when this file (beside the job) exists.
FAIL_FLAG = "fail-next-start"
FAILS_WHEN_FLAGGED = ("def main(argv=None):\n",
                      "def main(argv=None):\n    if os.path.exists(os.path.join(os.path.dirname(os.path.dirname("
                      "os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), 'fail-next-start')):\n"
                      "        raise SystemExit('cannot start: flagged')\n")


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def restart_with(job: Job, name: str, change: tuple[str, str] | None = None, rc: int = 0) -> str:
    """A restart with a new release made of src/<name>; its release's name."""
    job.write_src(name, change or ('p.add_argument("--save-every", type=int, default=10)',
                                   f'p.add_argument("--save-every", type=int, default={10 + len(name)})'))
    time.sleep(1.1)  # another second: another release name
    got, out, events = job.play("restart_training.yml", code_src=str(job.src / name))
    assert got == rc, out
    return str(module_ends(events, "deploy_code")[0]["data"]["release"])


def _setup(job: Job) -> tuple[str, str, str]:
    """good1 verified, a crashing release rolled back from, good2 verified and running."""
    assert job.play("restart_training.yml")[0] == 0
    good1 = job.good()["release"]
    crash = restart_with(job, "crash", BAD_RELEASES["crashes"], rc=2)
    good2 = restart_with(job, "good2", FAILS_WHEN_FLAGGED)
    assert job.good()["release"] == good2
    return good1, crash, good2


def test_a_failed_hand_rollback_starts_the_run_before_it_again(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        _, crash, good2 = _setup(job)
        healthy = target.host_pid(job.demo / "train.pid")
        argv, _, cwd = process(healthy)

        rc, out, events = job.play("rollback.yml", "-e", f"release={crash}")
        assert rc == 2, out
        (failed,) = module_ends(events, "rollback")
        pid = int((job.demo / "train.pid").read_text())
        assert failed["msg"].startswith(f"rollback to release {crash} (no git commit) failed: the relaunched run "
                                        "failed verify: the job (pid "), failed["msg"]
        assert "code 1" in failed["msg"]
        assert failed["msg"].split("\n")[0].endswith(
            f"; what ran before is running again: release {good2} (no git commit), pid {pid}, verified; "
            f"current switched back to {good2}"), failed["msg"]
        assert f" (warning: release {crash} was known to have failed: failed at " in failed["msg"]
        assert failed["data"]["restored"] == {"release": good2, "pid": pid, "verified": True}

        host_pid = target.host_pid(job.demo / "train.pid")
        assert host_pid != healthy and wait_for(lambda: job.running() == [host_pid], 5)
        assert process(host_pid)[0] == argv and process(host_pid)[2] == cwd
        assert all(process(host_pid)[1].get(k) == v for k, v in job.vars["train_env"].items())
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good2}"
        assert job.good()["release"] == good2 and job.good()["pid"] == pid
        assert not (job.demo / "train.rollback-prior.json").exists()
    finally:
        kill_marked(cleanup_marker)


def test_when_the_run_before_fails_too_it_says_nothing_is_running(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        _, crash, good2 = _setup(job)
        (job.demo / FAIL_FLAG).write_text("")  # good2 now fails at its start

        rc, out, events = job.play("rollback.yml", "-e", f"release={crash}")
        assert rc == 2, out
        (failed,) = module_ends(events, "rollback")
        line = failed["msg"].split("\n")[0]
        # Exited within the launch's first moments, or seen exiting by its verify: either way, said.
        assert (f"; what ran before was started again (release {good2} (no git commit), pid " in line
                and "but failed verify too: the job (pid " in line) or \
            f"; starting what ran before (release {good2} (no git commit)) again failed: the job started again (pid " \
            in line  # named as what it is: not the rollback's relaunch
        assert "code 1" in line.split("what ran before")[1], line
        assert line.endswith(f"; current switched back to {good2}; nothing is running"), line
        assert failed["data"]["restored"]["verified"] is False
        assert wait_for(lambda: job.running() == [], 5)
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good2}"
    finally:
        kill_marked(cleanup_marker)
