"""A plain deploy into a code_dest that has releases: the job then runs from code_dest itself,
so `current` (which would still name the old release) is removed, saying so, and -C says it
would be; the releases stay. Another job that runs from that release keeps it, also one that
uses it only through its environment (PYTHONPATH) or an open file, with its pidfile
elsewhere: the same guard keeps `current` in a rollback to a plain deploy's run. With no
`current`, the next release is made whole and `rollback release: previous` goes to the newest
release that passed verify."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import kill_marked, wait_for
from tests.modules.conftest import PlayRun, Target, _target_for
from tests.modules.test_rb_shared_dest import Shared


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


def _plain(jobs: Shared, *args: str, pidfile: Path | None = None, stop_follows: bool = True) -> PlayRun:
    """A plain deploy; with pidfile, as the restart role deploys (its stop follows) unless told."""
    deploy: dict[str, object] = {"src": f"{jobs.w}/src/plain/", "dest": str(jobs.dest)}
    if pidfile:
        deploy["pidfile"] = str(pidfile)
        deploy["stop_follows"] = stop_follows
    run = jobs.target.play([{"deploy_code": deploy}], *args)
    assert run.rc == 0, run.out
    return run


def _stop(jobs: Shared, pidfile: Path) -> None:
    assert jobs.target.play([{"kill_old": {"pidfile": str(pidfile), "grace": 2}}]).rc == 0


def _removed(jobs: Shared, release: str, verb: str = "removed") -> str:
    return (f"; {verb} current ({jobs.link} -> release {release}): the code deployed in place is no release, so "
            "none is current (the releases stay)")


@contextmanager
def _user(jobs: Shared, marker: str, release: str, how: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process of another job, started here, that uses the release only through its
    environment or an open file: its command line and working directory name no release."""
    path = jobs.dest / "releases" / release
    env = dict(os.environ)
    fds: tuple[int, ...] = ()
    if how == "environment":
        env["PYTHONPATH"] = f"/opt/lib:{path}"
    else:
        fds = (os.open(path / "job.sh", os.O_RDONLY),)
    proc = subprocess.Popen(["sleep", marker], env=env, cwd=jobs.w, pass_fds=fds, start_new_session=True)
    for fd in fds:
        os.close(fd)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_plain_deploy_removes_current_and_check_mode_says_it_would(target: Target, cleanup_marker: str) -> None:
    jobs = Shared(target, cleanup_marker)
    a = jobs.pidfile("A")
    try:
        jobs.launch("A", f"{jobs.link}/job.sh", a, chdir=str(jobs.link), deploy="good")
        release = os.readlink(jobs.link).split("/")[-1]

        dry = _plain(jobs, "-C", pidfile=a)
        assert str(dry.end("deploy_code")["msg"]).endswith(_removed(jobs, release, "would remove")), dry.out
        assert os.readlink(jobs.link) == f"releases/{release}"

        # The job's own run from the release (its cwd is in it) does not keep current: the
        # restart stops it next and runs from code_dest.
        done = _plain(jobs, pidfile=a).end("deploy_code")
        assert done["msg"].startswith(f"deployed 1 of 1 files to {jobs.dest}: job.sh"), done
        assert done["msg"].endswith(_removed(jobs, release)), done["msg"]
        assert done["data"]["unlinked"] == str(jobs.link) and done["data"]["unlinked_release"] == release
        assert not os.path.lexists(jobs.link)
        assert (jobs.dest / "releases" / release / "job.sh").is_file()  # the release stays
        _stop(jobs, a)
        jobs.launch("A", f"{jobs.dest}/job.sh", a, chdir=str(jobs.dest))
        assert "ready: plain A" in Path(f"{a}.log").read_text() and not os.path.lexists(jobs.link)
    finally:
        kill_marked(cleanup_marker)


@pytest.mark.parametrize("how", ["environment", "open file"])
def test_a_plain_deploy_keeps_current_another_job_uses(target: Target, cleanup_marker: str, how: str) -> None:
    jobs = Shared(target, cleanup_marker)
    jobs.launch("A", f"{jobs.link}/job.sh", jobs.pidfile("A"), deploy="good")
    release = os.readlink(jobs.link).split("/")[-1]
    try:
        with _user(jobs, cleanup_marker, release, how) as other:
            done = _plain(jobs).end("deploy_code")
            why = "its environment: PYTHONPATH" if how == "environment" else "a file it has open"
            assert done["msg"].endswith(f"; current ({jobs.link} -> release {release}) kept: pid {other.pid} "
                                        f"({why}) uses it"), done["msg"]
            assert os.readlink(jobs.link) == f"releases/{release}"
        # Once it is gone, the same (up to date) deploy removes it.
        again = _plain(jobs).end("deploy_code")
        assert again["status"] == "changed", again
        assert again["msg"] == f"1 files up to date in {jobs.dest}{_removed(jobs, release)}"
        assert not os.path.lexists(jobs.link)
    finally:
        kill_marked(cleanup_marker)


@pytest.mark.parametrize("how", ["environment", "open file"])
def test_a_rollback_keeps_current_a_job_uses_through_its_environment(target: Target, cleanup_marker: str,
                                                                      how: str) -> None:
    """Its pidfile is elsewhere and its command line and cwd name no release."""
    jobs = Shared(target, cleanup_marker)
    try:
        failed = jobs.a_plain_then_failed_release()
        with _user(jobs, cleanup_marker, failed.split("/")[-1], how) as other:
            line = jobs.roll_back_a()
            why = "its environment: PYTHONPATH" if how == "environment" else "a file it has open"
            assert line.endswith(f", verified; current ({jobs.link} -> release {failed.split('/')[-1]}) kept: "
                                 f"pid {other.pid} ({why}) uses it") and "current removed" not in line, line
            assert os.readlink(jobs.link) == failed
            assert other.poll() is None
    finally:
        kill_marked(cleanup_marker)


def test_previous_without_current_is_the_newest_release_that_passed(target: Target, cleanup_marker: str) -> None:
    jobs = Shared(target, cleanup_marker)
    a = jobs.pidfile("A")
    try:
        jobs.launch("A", f"{jobs.link}/job.sh", a, deploy="good")
        good = os.readlink(jobs.link).split("/")[-1]
        time.sleep(1.1)  # another second: another release name
        jobs.launch("A", f"{jobs.link}/job.sh", a, deploy="bad", must_pass=False)  # never verified
        bad = os.readlink(jobs.link).split("/")[-1]
        assert str(_plain(jobs, pidfile=a).end("deploy_code")["msg"]).endswith(_removed(jobs, bad))

        run = target.play([{"rollback": {"pidfile": str(a), "release": "previous",
                                         "verify": {"processes": 1, "stable_for": 1, "within": 10}}}])
        assert run.rc == 0, run.out
        line = str(run.end("rollback")["msg"]).splitlines()[0]
        assert line.startswith(f"rolled back to release {good} ") and line.endswith(", verified"), line
        assert os.readlink(jobs.link) == f"releases/{good}"
        assert wait_for(lambda: "ready: good A" in Path(f"{a}.log").read_text().split("ready: bad")[-1], 5)
    finally:
        kill_marked(cleanup_marker)


def test_the_release_after_a_plain_deploy_is_made_whole(target: Target, cleanup_marker: str) -> None:
    """No `current`: no base to link from and no 'previous' but the newest that passed, which
    keep_releases: 1 keeps; the same code as that release is a new release, made current."""
    jobs = Shared(target, cleanup_marker)
    a = jobs.pidfile("A")
    try:
        jobs.launch("A", f"{jobs.link}/job.sh", a, deploy="good")
        good = os.readlink(jobs.link).split("/")[-1]
        _plain(jobs, pidfile=a)
        _stop(jobs, a)
        jobs.launch("A", f"{jobs.dest}/job.sh", a)
        time.sleep(1.1)
        run = target.play([{"deploy_code": {"src": f"{jobs.w}/src/good/", "dest": str(jobs.dest), "releases": True,
                                            "keep_releases": 1, "pidfile": str(a)}}])
        assert run.rc == 0, run.out
        made = run.end("deploy_code")
        assert made["data"]["previous"] is None and made["data"]["linked"] == 0, made
        assert made["data"]["spared"] == {good: "the newest that passed verify before current (a rollback's "
                                                "'previous')"}, made
        assert os.readlink(jobs.link) == f"releases/{made['data']['release']}" != f"releases/{good}"
    finally:
        kill_marked(cleanup_marker)


def test_a_plain_deploy_with_delete_keeps_the_releases(target: Target, cleanup_marker: str) -> None:
    """delete removes what src lacks under dest, but never the releases of earlier release
    deploys there (the rollback's targets): they are deploy_code's own, not the code's files."""
    jobs = Shared(target, cleanup_marker)
    deploy = {"src": f"{jobs.w}/src/good/", "dest": str(jobs.dest), "releases": True}
    assert jobs.target.play([{"deploy_code": deploy}]).rc == 0
    release = os.readlink(jobs.link).split("/")[-1]
    kept = sorted(p.relative_to(jobs.dest) for p in (jobs.dest / "releases").rglob("*"))
    (jobs.dest / "stray.txt").write_text("not in src\n")
    run = jobs.target.play([{"deploy_code": {"src": f"{jobs.w}/src/plain/", "dest": str(jobs.dest),
                                             "delete": True}}])
    assert run.rc == 0, run.out
    msg = str(run.end("deploy_code")["msg"])
    assert "deleted 1: stray.txt" in msg and _removed(jobs, release) in msg, msg
    assert not (jobs.dest / "stray.txt").exists() and not jobs.link.is_symlink()
    assert sorted(p.relative_to(jobs.dest) for p in (jobs.dest / "releases").rglob("*")) == kept


def test_a_folder_named_releases_of_the_code_itself_is_not_spared(target: Target, cleanup_marker: str) -> None:
    """Only deploy_code's releases are spared: a plain `releases/` folder that src no longer
    has (no release manifests in it, no current link into it) is the code's, and goes."""
    jobs = Shared(target, cleanup_marker)
    (jobs.dest / "releases").mkdir(parents=True)
    (jobs.dest / "releases" / "notes.txt").write_text("old notes\n")
    run = jobs.target.play([{"deploy_code": {"src": f"{jobs.w}/src/plain/", "dest": str(jobs.dest),
                                             "delete": True}}])
    assert run.rc == 0, run.out
    assert "deleted 1: releases/notes.txt" in str(run.end("deploy_code")["msg"]), run.out
    assert not (jobs.dest / "releases" / "notes.txt").exists()
