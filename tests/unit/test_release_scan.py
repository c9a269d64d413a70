"""The scan of /proc for processes using a release is bounded: past its deadline, what it has
not found counts as in use, and says why."""

from __future__ import annotations

import os
import pwd
import time
from pathlib import Path

import pytest

from opsrunner.remote import inuse
from opsrunner.remote.inuse import release_users
from opsrunner.remote.procs import Proc


def test_a_scan_out_of_time_keeps_the_release(tmp_path: Path) -> None:
    (tmp_path / "R").mkdir()
    scan = release_users(str(tmp_path), ["R"], deadline_s=0.0)
    assert scan.kept("R") == "which processes use it cannot be told: the scan of /proc ran out of time (2 s)"


def test_a_scan_in_time_finds_this_processs_directory(tmp_path: Path) -> None:
    (tmp_path / "R" / "src").mkdir(parents=True)
    here = os.getcwd()
    os.chdir(tmp_path / "R" / "src")
    try:
        pid = os.fork()
        if pid == 0:
            os.execvp("sleep", ["sleep", "5"])
    finally:
        os.chdir(here)
    try:
        time.sleep(0.2)
        assert release_users(str(tmp_path), ["R"]).kept("R") == f"pid {pid} (its working directory) uses it"
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def _sleeper(argv: list[str], cwd: str, user: int | None = None, fd: int | None = None) -> int:
    pid = os.fork()
    if pid == 0:
        os.chdir(cwd)
        if fd is not None:
            os.dup2(fd, 3, inheritable=True)
        if user is not None:
            os.setgid(user)
            os.setuid(user)
        os.execvp(argv[0], argv)
    time.sleep(0.2)
    return pid


def test_a_process_in_d_state_is_not_read_and_keeps_the_release(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its command line names the release, but a read of it could block (D state: hung NFS):
    not read, and the release counts as in use, saying why."""
    (tmp_path / "releases" / "R").mkdir(parents=True)
    pid = _sleeper(["sh", "-c", f"sleep 5; : {tmp_path}/releases/R"], "/")
    real = inuse.read_proc

    def d_state(p: int) -> Proc | None:  # a real D state cannot be made harmlessly
        info = real(p)
        if info is not None and p == pid:
            info.state = "D"
        return info

    try:
        folder = str(tmp_path / "releases")
        assert release_users(folder, ["R"]).kept("R") == f"pid {pid} (its command line) uses it"
        monkeypatch.setattr(inuse, "read_proc", d_state)
        scan = release_users(folder, ["R"])
        why = f"1 process in uninterruptible sleep (D state: pid {pid}) could not be read"
        assert scan.kept("R") == f"which processes use it cannot be told: {why}"
        assert scan.limits() == why
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_as_root_another_users_open_files_are_read(tmp_path: Path) -> None:
    (tmp_path / "R").mkdir()
    (tmp_path / "R" / "data").write_text("x")
    nobody = pwd.getpwnam("nobody").pw_uid
    with open(tmp_path / "R" / "data") as data:  # open before it becomes nobody's
        pid = _sleeper(["sleep", "5"], "/", nobody, data.fileno())
    try:
        scan = release_users(str(tmp_path), ["R"])
        assert scan.kept("R") == f"pid {pid} (a file it has open) uses it"
        assert scan.limits() == ""
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
