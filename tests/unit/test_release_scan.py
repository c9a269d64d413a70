"""The scan of /proc for processes using a release is bounded: past its deadline, what it has
not found counts as in use, and says why."""

from __future__ import annotations

import os
import time
from pathlib import Path

from opsrunner.remote.inuse import release_users


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
