"""kill_old's wait for its victims to exit (procs.py's _wait_gone): woken by pidfds, judged by
pid and start time. Real processes, started here and stopped by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from opsrunner.remote import procs


def _started(argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen(argv)
    return proc, procs.read_proc(proc.pid).start


def test_a_victim_that_exits_is_gone_before_the_grace_ends() -> None:
    proc, start = _started(["sleep", "30"])
    killer = threading.Timer(0.3, lambda: os.kill(proc.pid, signal.SIGTERM))
    killer.start()
    try:
        left = procs._wait_gone({proc.pid: start}, 30.0)
        # Not reaped yet (the test is its parent): a zombie counts as gone, as for a supervised job.
        assert left == set()
        assert procs.read_proc(proc.pid).state == "Z"
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()


def test_a_victim_that_lives_on_is_reported_when_the_grace_ends() -> None:
    proc, start = _started(["sleep", "30"])
    try:
        assert procs._wait_gone({proc.pid: start}, 0.3) == {proc.pid}
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_pid_with_another_start_time_is_not_waited_for() -> None:
    """The pid now names another process (reused): it is not the victim, nothing to wait for."""
    proc, start = _started(["sleep", "30"])
    try:
        assert procs._wait_gone({proc.pid: start + 1}, 30.0) == set()
        assert proc.poll() is None  # and it was left alone
    finally:
        proc.kill()
        proc.wait()


def test_without_pidfds_the_wait_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    proc, start = _started(["sleep", "30"])
    monkeypatch.setattr(procs, "open_pidfd", lambda pid: None)  # a kernel or Python without pidfd_open
    killer = threading.Timer(0.2, lambda: os.kill(proc.pid, signal.SIGTERM))
    killer.start()
    try:
        assert procs._wait_gone({proc.pid: start}, 30.0) == set()
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()


def test_a_victim_seen_alive_just_after_its_pidfd_fired_is_still_waited_for_by_its_pidfd(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pidfd is readable as its process exits, a moment before /proc shows the zombie. Seen
    alive then, the victim must still wake the wait when /proc catches up: the wait used to
    drop its pidfd and sleep to the deadline (a restart's kill_old took its 5 s grace)."""
    proc, start = _started(["sleep", "30"])
    real_alive, looks = procs.alive, []

    def alive(pid: int, start: float | None = None) -> bool:
        looks.append(pid)
        if len(looks) == 2:  # the first look after the exit: /proc has not caught up yet
            return True
        return bool(real_alive(pid, start))

    monkeypatch.setattr(procs, "alive", alive)
    killer = threading.Timer(0.3, lambda: os.kill(proc.pid, signal.SIGTERM))
    killer.start()
    begun = time.monotonic()
    try:
        assert procs._wait_gone({proc.pid: start}, 60.0) == set()
        assert time.monotonic() - begun < 30  # woken, not left to the 60 s deadline
        assert len(looks) >= 3
    finally:
        killer.cancel()
        proc.kill()
        proc.wait()
