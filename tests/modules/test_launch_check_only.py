"""launch_detached check_only: the launch's own checks on the target and nothing else. A good
launch passes (ok, not changed) and a bad one fails with the reason the launch itself gives,
in a real run and in --check alike, a job running from the pidfile making no difference; in
every case the target's files are as they were (no log, folder, pidfile, launch record or
lock file made) and no process is started or stopped."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pids_with, wait_for
from tests.modules.conftest import PlayRun, Target
from tests.modules.conftest import _target_for as target_for

#: (path relative to the site, kind, size, mtime in ns) of every entry, the site's own included.
Snapshot = list[tuple[str, str, int, int]]


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _snapshot(site: Path) -> Snapshot:
    found: Snapshot = []
    for folder, dirs, files in os.walk(site):
        for name in [".", *dirs, *files]:
            path = Path(folder, name)
            st = path.lstat()
            kind = "dir" if path.is_dir() and not path.is_symlink() else "file"
            found.append((str(path.relative_to(site)), kind, st.st_size if kind == "file" else 0, st.st_mtime_ns))
    return sorted(found)


def _site(target: Target) -> Path:
    """The test's files on the target: a chdir that exists, a regular file to put paths under."""
    site = target.work / "site"
    (site / "app").mkdir(parents=True)
    (site / "afile").write_text("a file, not a folder\n")
    (site / "linked.log").symlink_to(site / "unmounted" / "train.log")  # a scratch disk not mounted
    return site


def _launch(target: Target, args: dict[str, Any], *flags: str) -> PlayRun:
    return target.play([{"name": "launch", "launch_detached": args}], *flags)


def _can_start(target: Target, msg: str) -> bool:
    """The check's message for the launch of _good: its program, found on PATH where named bare."""
    python = target.python
    return msg == f"the job can start here: {python}" if python.startswith("/") else (
        msg.startswith("the job can start here: /") and msg.endswith(f"/{python}"))


def _good(target: Target, site: Path, marker: str) -> dict[str, Any]:
    """A launch that can start: its log's and pidfile's folders are to be made."""
    return {"argv": [target.python, "-c", "import time; time.sleep(600)", marker], "chdir": str(site / "app"),
            "log": "logs/new/train.log", "pidfile": str(site / "state" / "job.pid"), "env": {"RUN_MARK": marker}}


def test_a_launch_that_can_start_passes_and_makes_nothing(target: Target, cleanup_marker: str) -> None:
    site = _site(target)
    before = _snapshot(site)
    for flags in ((), ("--check",)):
        run = _launch(target, {**_good(target, site, cleanup_marker), "check_only": True}, *flags)
        assert run.rc == 0, run.out
        end = run.end("launch")
        assert (end["status"], end["changed"]) == ("ok", False), run.out
        assert _can_start(target, end["msg"]), run.out
        assert _snapshot(site) == before, flags
        assert pids_with(cleanup_marker) == []


def test_a_running_job_is_left_alone_and_the_checks_still_run(target: Target, cleanup_marker: str) -> None:
    site = _site(target)
    good = _good(target, site, cleanup_marker)
    started = _launch(target, good)
    assert started.rc == 0, started.out
    job = target.host_pid(site / "state" / "job.pid")
    before = _snapshot(site)
    passed = _launch(target, {**good, "check_only": True})
    assert passed.rc == 0 and _can_start(target, passed.end("launch")["msg"]), passed.out
    failed = _launch(target, {**good, "check_only": True, "log": str(site / "afile" / "t.log")})
    assert failed.rc == 2
    assert failed.end("launch")["msg"] == (f"cannot open the log {site}/afile/t.log: directory {site}/afile is not "
                                           "a directory")
    assert _snapshot(site) == before
    assert pids_with(cleanup_marker) == [job]
    os.kill(job, 9)
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 5)


BAD = {
    "program": ({"argv": ["trian-no-such-program"], "env": {"PATH": "/usr/bin:/bin"}},
                "program trian-no-such-program not found on the target (searched PATH=/usr/bin:/bin)"),
    "chdir": ({"chdir": "{site}/no-such-dir"}, "chdir {site}/no-such-dir does not exist on the target"),
    "log": ({"log": "{site}/afile/logs/train.log"},
            "cannot open the log {site}/afile/logs/train.log: directory {site}/afile is not a directory"),
    "pidfile": ({"pidfile": "{site}/afile/run/job.pid"},
                "cannot write the pidfile {site}/afile/run/job.pid: {site}/afile is not a directory; the job was "
                "not started"),
    "log_link": ({"log": "{site}/linked.log"},
                 "cannot open the log {site}/linked.log: it leads through a symbolic link to "
                 "{site}/unmounted/train.log, whose folder {site}/unmounted does not exist"),
    "kernel_fs": ({"log": "/proc/no-such-dir/train.log"},
                  "cannot open the log /proc/no-such-dir/train.log: directory /proc (to create /proc/no-such-dir) "
                  "is on the kernel's /proc file system, where no file or folder can be made"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_launch_that_cannot_start_fails_with_the_launchs_reason_and_changes_nothing(
        target: Target, cleanup_marker: str, case: str) -> None:
    site = _site(target)
    changes, reason = BAD[case]
    args = {**_good(target, site, cleanup_marker),
            **{k: v.format(site=site) if isinstance(v, str) else v for k, v in changes.items()}}
    reason = reason.format(site=site)
    before = _snapshot(site)
    for flags in ((), ("--check",)):
        run = _launch(target, {**args, "check_only": True}, *flags)
        assert (run.rc, run.end("launch")["msg"]) == (2, reason), (flags, run.out)
        assert _snapshot(site) == before, flags
    launched = _launch(target, args)  # the launch itself gives the same reason
    assert (launched.rc, launched.end("launch")["msg"]) == (2, reason), launched.out
    assert pids_with(cleanup_marker) == []


def test_check_mode_counts_what_an_earlier_deploy_would_make(target: Target, cleanup_marker: str) -> None:
    site = _site(target)
    src = target.work / "src"
    src.mkdir()
    (src / "train.py").write_text("print('hi')\n")
    dest = site / "code"
    tasks = [{"name": "deploy", "deploy_code": {"src": str(src), "dest": str(dest)}},
             {"name": "launch", "launch_detached": {**_good(target, site, cleanup_marker), "chdir": str(dest),
                                                    "check_only": True}}]
    before = _snapshot(site)
    dry = target.play(tasks, "--check")
    assert dry.rc == 0, dry.out
    assert _can_start(target, dry.end("launch")["msg"]), dry.out
    assert _snapshot(site) == before and not dest.exists()
    alone = target.play(tasks[1:], "--check")
    assert alone.end("launch")["msg"] == f"chdir {dest} does not exist on the target", alone.out


# Not through the container: a tmpfs mounted here is not seen there (its share is bound at its start).
@pytest.mark.parametrize("transport", ["local", "ssh+reaper+fd_holder"])
def test_a_full_disk_under_the_log_is_found_before_anything_starts(
        transport: str, request: pytest.FixtureRequest, tmp_path: Path, cleanup_marker: str) -> None:
    """A file can still be made on a full disk, so no probe finds it: the job started and
    failed at its first write, after the old run was stopped. The check says so first."""
    target = target_for(transport, request, tmp_path)
    site = _site(target)
    full = site / "full"
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(full)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with contextlib.suppress(OSError), (full / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        args = {**_good(target, site, cleanup_marker), "log": str(full / "logs" / "train.log")}
        reason = f"cannot open the log {full}/logs/train.log: directory {full} is on a full file system (no block free)"
        before = _snapshot(site)
        for flags in ((), ("--check",)):
            run = _launch(target, {**args, "check_only": True}, *flags)
            assert (run.rc, run.end("launch")["msg"]) == (2, reason), (flags, run.out)
            assert _snapshot(site) == before, flags
        launched = _launch(target, args)  # the launch itself makes the log's folder first, and says so
        msg = launched.end("launch")["msg"]
        assert launched.rc == 2 and msg.startswith(
            f"cannot open the log {full}/logs/train.log: directory {full}/logs is on a full file system "
            "(no block free)"), launched.out
        assert pids_with(cleanup_marker) == []
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
