"""launch's watch of a new job (launch.py's _settle): a job that ends at once is reported as
ended, never as launched. Real processes, started here and reaped by this test."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from opsrunner.remote import launch


def test_a_job_that_ends_at_once_is_seen_ended_even_when_proc_lags_its_pidfd(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pidfd is readable as its process exits, a moment before /proc shows the zombie. The
    first look after the wake-up is made to see it alive, as in that moment: the watch must
    look again, not report the dead job as launched."""
    real_read, looks = launch.read_proc, []

    def read_proc(pid: int) -> Any:
        p = real_read(pid)
        looks.append(p.state if p is not None else None)
        if len(looks) == 1 and p is not None:
            p.state = "S"  # /proc has not caught up with the exit yet
        return p

    monkeypatch.setattr(launch, "read_proc", read_proc)
    job = subprocess.Popen(["sh", "-c", "exit 3"], start_new_session=True)  # sid == pid, as a job's
    try:
        job_ended = time.monotonic() + 10
        while time.monotonic() < job_ended and real_read(job.pid).state != "Z":
            time.sleep(0.01)
        looks.clear()
        begun = time.monotonic()
        seen = launch._settle(job.pid, wait_s=5.0)
        assert seen is not None and seen.state == "Z", looks
        assert time.monotonic() - begun < 2.5  # woken by the pidfd, not left to the 5 s end
        assert len(looks) >= 2
    finally:
        job.wait()


def test_a_job_that_lives_is_seen_running_when_the_watch_ends() -> None:
    job = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        begun = time.monotonic()
        seen = launch._settle(job.pid, wait_s=0.3)
        assert seen is not None and seen.state != "Z" and seen.sid == job.pid
        assert time.monotonic() - begun >= 0.29
    finally:
        job.kill()
        job.wait()
