"""Which live processes keep a release: a plain deploy into a code_dest with releases removes
`current` unless a process uses that release, judged as the process sees its paths (a job in
its own mount namespace with code_dest bind-mounted elsewhere; words of its command line and
environment, relative ones against its working directory, never OLDPWD); the job's own tree
(what it daemonized too) does not count where its stop follows (stop_follows), and does where
it keeps running; another user's process the agent cannot inspect is judged by its command
line, saying so. A code folder of its own named releases/ is no release store, and a src with
a top-level releases/ is refused into a dest that holds releases."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import ROOT, kill_marked, wait_for
from tests.modules.conftest import Target, _target_for
from tests.modules.test_rb_shared_dest import Shared


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


def _release(jobs: Shared) -> str:
    """A release deploy (nothing running): the release's name."""
    run = jobs.target.play([{"deploy_code": {"src": f"{jobs.w}/src/good/", "dest": str(jobs.dest), "releases": True}}])
    assert run.rc == 0, run.out
    return os.readlink(jobs.link).split("/")[-1]


def _plain_msg(jobs: Shared, **more: object) -> str:
    run = jobs.target.play([{"deploy_code": {"src": f"{jobs.w}/src/plain/", "dest": str(jobs.dest), **more}}])
    assert run.rc == 0, run.out
    return str(run.end("deploy_code")["msg"])


def _removed(jobs: Shared, release: str) -> str:
    return (f"; removed current ({jobs.link} -> release {release}): the code deployed in place is no release, so "
            "none is current (the releases stay)")


@contextmanager
def _shell(command: str, cwd: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`sh -c COMMAND`: the shell stays (its command line as written) while its sleep runs."""
    proc = subprocess.Popen(["sh", "-c", command], cwd=cwd, env={**os.environ, **(env or {})},
                            start_new_session=True)
    try:
        time.sleep(0.3)  # the shell has started its sleep
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
@pytest.mark.parametrize("how", ["cwd", "env"])
def test_a_job_in_its_own_mount_namespace_keeps_current(target: Target, cleanup_marker: str, how: str) -> None:
    """code_dest bind-mounted at ws in the job's mount namespace: its paths there name the
    release, which this host sees under another path."""
    jobs = Shared(target, cleanup_marker)
    release = _release(jobs)
    ws = jobs.w / "ws"
    ws.mkdir()
    where = "cd ws/current && " if how == "cwd" else "PYTHONPATH=ws/current/src "
    inner = f"mount --bind {jobs.dest} ws && {where}exec sleep {cleanup_marker}"
    if subprocess.run(["unshare", "-m", "true"]).returncode:
        pytest.skip("no mount namespaces here")
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", inner], cwd=jobs.w, start_new_session=True)
    try:
        assert wait_for(lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep"), 5)
        why = "its working directory" if how == "cwd" else "its environment: PYTHONPATH"
        msg = _plain_msg(jobs)
        assert msg.endswith(f"; current ({jobs.link} -> release {release}) kept: pid {proc.pid} ({why}) uses it"), msg
        assert os.readlink(jobs.link) == f"releases/{release}"
    finally:
        proc.kill()
        proc.wait()
        kill_marked(cleanup_marker)


def test_words_are_judged_as_paths(target: Target, cleanup_marker: str) -> None:
    """A shell's `(cd D/current)`, `cd D/current&&python` and `X=D/releases/R,/opt` name the
    release; a relative PYTHONPATH (current/src) is taken from the process's directory; a path
    that merely contains D's (/srv/other/D/releases/R) and OLDPWD name nothing."""
    jobs = Shared(target, cleanup_marker)
    release = _release(jobs)
    d, m = jobs.dest, cleanup_marker
    for command, cwd, env, why in (
            (f"sleep {m}; : '(cd {d}/current)'", jobs.w, None, "its command line"),
            (f"sleep {m}; : 'cd {d}/current&&python'", jobs.w, None, "its command line"),
            (f"sleep {m}; : X={d}/releases/{release},/opt", jobs.w, None, "its command line"),
            (f"exec sleep {m}", jobs.dest, {"PYTHONPATH": "current/src"}, "its environment: PYTHONPATH")):
        with _shell(command, cwd, env) as proc:
            msg = _plain_msg(jobs)
            assert msg.endswith(f"; current ({jobs.link} -> release {release}) kept: pid {proc.pid} ({why}) "
                                "uses it"), (command, msg)
    other = Path(tempfile.mkdtemp(dir=jobs.w)) / str(d).lstrip("/") / "releases" / release
    other.mkdir(parents=True)
    with _shell(f"sleep {m}; : {other.parent.parent.parent}{d}/releases/{release}/x.py {other}/x.py", jobs.w,
                {"OLDPWD": f"{d}/current"}):
        assert _plain_msg(jobs).endswith(_removed(jobs, release))
    assert not jobs.link.is_symlink()
    kill_marked(cleanup_marker)


def _helper_job(jobs: Shared, marker: str) -> tuple[Path, str]:
    """Job A launched through current, with a helper it daemonized (setsid: its own session)."""
    helper = jobs.w / "src" / "helper"
    helper.mkdir()
    (helper / "job.sh").write_text(f"#!/bin/sh\necho ready: helper $1\nsetsid sleep {marker} &\nexec sleep {marker}\n")
    (helper / "job.sh").chmod(0o755)
    a = jobs.pidfile("A")
    jobs.launch("A", f"{jobs.link}/job.sh", a, chdir=str(jobs.link), deploy="helper")
    return a, os.readlink(jobs.link).split("/")[-1]


def test_the_jobs_daemonized_helper_is_its_own_when_its_stop_follows(target: Target, cleanup_marker: str) -> None:
    jobs = Shared(target, cleanup_marker)
    try:
        a, release = _helper_job(jobs, cleanup_marker)
        msg = _plain_msg(jobs, pidfile=str(a), stop_follows=True)
        assert msg.endswith(_removed(jobs, release)), msg
        assert not jobs.link.is_symlink()
    finally:
        kill_marked(cleanup_marker)


def test_what_the_job_spawns_during_the_scan_is_its_own(target: Target, cleanup_marker: str) -> None:
    """A job that keeps starting short children from the release: a child started after its
    tree was read is the job's too, never "another job" that keeps current."""
    from opsrunner.remote.unlink import op_unlink_current

    jobs = Shared(target, cleanup_marker)
    spawner = jobs.w / "src" / "spawner"
    spawner.mkdir()
    # a child every few ms, each living 0.5 s: some start between the tree's read and the scan
    loop = "while :; do sleep 0.5 & sleep 0.005; done"
    (spawner / "job.sh").write_text(f"#!/bin/sh\nexec sh -c '{loop}' {cleanup_marker}\n")
    (spawner / "job.sh").chmod(0o755)
    a = jobs.pidfile("A")
    try:
        jobs.launch("A", f"{jobs.link}/job.sh", a, chdir=str(jobs.link), deploy="spawner")
        args = {"dest": str(jobs.dest), "pidfile": str(a), "stop_follows": True, "check_mode": True}
        replies = [op_unlink_current(args) for _ in range(40)]  # type: ignore[arg-type]
        assert [r.get("kept") for r in replies if r.get("kept")] == []
        assert all(r.get("unlinked") for r in replies)
    finally:
        kill_marked(cleanup_marker)
        time.sleep(0.6)  # its last children end


def test_the_job_keeps_current_where_no_stop_follows(target: Target, cleanup_marker: str) -> None:
    """A deploy alone (or --tags deploy): the job still runs from the release afterwards."""
    jobs = Shared(target, cleanup_marker)
    a = jobs.pidfile("A")
    try:
        jobs.launch("A", f"{jobs.link}/job.sh", a, chdir=str(jobs.link), deploy="good")
        release = os.readlink(jobs.link).split("/")[-1]
        pid = int(a.read_text().split()[0])
        msg = _plain_msg(jobs, pidfile=str(a))
        assert msg.endswith(f"; current ({jobs.link} -> release {release}) kept: pid {pid} (its working "
                            "directory) uses it"), msg
        assert os.readlink(jobs.link) == f"releases/{release}"
    finally:
        kill_marked(cleanup_marker)


def _as_nobody(dest: Path) -> str:
    """op_unlink_current as an unprivileged agent (python -S, user nobody) would run it."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from opsrunner.remote.unlink import op_unlink_current; "
            "print(op_unlink_current({'dest': sys.argv[2]}))")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-S", "-c",
                          code, str(ROOT), str(dest)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv(1)")
def test_another_users_process_is_judged_by_its_command_line_saying_so(cleanup_marker: str) -> None:
    base = Path(tempfile.mkdtemp(prefix="opsrunner-users-"))
    try:
        base.chmod(0o755)
        _mk_release(base / "code")
        (base / "code").chmod(0o777)
        release = os.readlink(base / "code" / "current").split("/")[-1]
        # root's process, its command line naming the release: nobody's agent sees it
        with _shell(f"sleep {cleanup_marker}; : {base}/code/current/x", base):
            out = _as_nobody(base / "code")
            assert "'kept': 'pid " in out and "(its command line) uses it'" in out, out
        # one that uses it through its working directory only cannot be told: judged by its command line
        with _shell(f"exec sleep {cleanup_marker}", base / "code" / "current"):
            out = _as_nobody(base / "code")
            assert "'unlinked': True" in out and "of other users judged by the command line only" in out, out
        assert not (base / "code" / "current").is_symlink() and (base / "code" / "releases" / release).is_dir()
    finally:
        kill_marked(cleanup_marker)
        shutil.rmtree(base)


def _mk_release(dest: Path) -> None:
    release = dest / "releases" / "20261201T030000Z-abc1234"
    (release / "src").mkdir(parents=True)
    (dest / "releases" / "20261201T030000Z-abc1234.json").write_text('{"name": "20261201T030000Z-abc1234"}')
    for folder in (dest, dest / "releases", release, release / "src"):
        folder.chmod(0o755)
    (dest / "current").symlink_to("releases/20261201T030000Z-abc1234")


def test_a_code_folder_named_releases_is_the_codes_own(target: Target, cleanup_marker: str) -> None:
    """releases/2024.1/ beside releases/2024.1.json (the code's own, no release's name): delete
    takes what src no longer has there; deploy_code's releases are left alone, saying so."""
    jobs = Shared(target, cleanup_marker)
    own = jobs.dest / "releases" / "2024.1"
    own.mkdir(parents=True)
    (own / "old.txt").write_text("stale\n")
    (jobs.dest / "releases" / "2024.1.json").write_text("{}\n")
    msg = _plain_msg(jobs, delete=True)
    assert "deleted 2: releases/2024.1.json, releases/2024.1/old.txt" in msg and "alone" not in msg, msg
    shutil.rmtree(jobs.dest / "releases")
    release = _release(jobs)
    msg = _plain_msg(jobs, delete=True)
    assert f"; left {jobs.dest}/releases/ alone (deploy_code's releases)" in msg, msg
    assert (jobs.dest / "releases" / release / "job.sh").is_file()


def test_a_plain_src_with_releases_is_refused_into_a_dest_with_releases(target: Target, cleanup_marker: str) -> None:
    jobs = Shared(target, cleanup_marker)
    release = _release(jobs)
    (jobs.w / "src" / "plain" / "releases").mkdir()
    (jobs.w / "src" / "plain" / "releases" / "notes.txt").write_text("mine\n")
    run = jobs.target.play([{"deploy_code": {"src": f"{jobs.w}/src/plain/", "dest": str(jobs.dest)}}])
    assert run.rc == 2, run.out
    msg = str(run.end("deploy_code")["msg"])
    assert msg.startswith(f"refusing to deploy {jobs.w}/src/plain/releases/notes.txt to "
                          f"{jobs.dest}/releases/notes.txt: {jobs.dest} holds deploy_code's releases"), msg
    assert "nothing was written" in msg
    assert not (jobs.dest / "job.sh").exists() and not (jobs.dest / "releases" / "notes.txt").exists()
    assert os.readlink(jobs.link) == f"releases/{release}"
