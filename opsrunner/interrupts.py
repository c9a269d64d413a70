"""Signals. SIGTERM is handled like Ctrl-C: the engine stops in-flight commands (closing their
channels, so the watchdogs on the targets kill the remote trees), prints the recap and
writes the JSON recap event; the exit code is 143. SIGHUP (the terminal went away) stops a
run's output to that terminal, told as lost, and the run goes on (hangup_drops_output)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from opsrunner.errors import Terminated


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # Once is enough: a second SIGTERM during the recap gets the default (immediate) death.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated("SIGTERM")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While active (main thread only), SIGTERM raises Terminated, a KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- what a task has done so far, told when the run is interrupted in it ---------------------
# A module whose work on a host takes several requests (rollback: start, then verify) says
# after each what the target has done; a run interrupted in the task records that, not only
# "interrupted". Keyed by host and task: the module may run on a host thread of the pool.
# Each run listening (PlayRun) is told it too, and tells its reporters (the history keeps
# it: a controller killed in the task leaves no result, only its record).
_so_far_lock = threading.Lock()
_so_far: dict[tuple[str, int], str] = {}
_listeners: list[Callable[[str, object, str], None]] = []


def so_far(host: str, task: object, text: str) -> None:
    """What `task` has done on `host` until now, in words, should the run be interrupted in it
    (or its controller killed)."""
    with _so_far_lock:
        _so_far[(host, id(task))] = text
        listeners = list(_listeners)
    for listener in listeners:  # each run tells only of its own tasks
        listener(host, task, text)


@contextlib.contextmanager
def so_far_told_to(listener: Callable[[str, object, str], None]) -> Iterator[None]:
    """While active, `listener(host, task, text)` is called with every so_far()."""
    with _so_far_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _so_far_lock:
            _listeners.remove(listener)


def take_so_far(host: str, task: object) -> str | None:
    """What so_far() last said of `task` on `host` (forgotten now: the task is recorded)."""
    with _so_far_lock:
        return _so_far.pop((host, id(task)), None)


# -- SIGHUP: the terminal went away ---------------------------------------------------------
# Its default action killed a run wherever it was: between stopping the old job and starting
# the new one too. A run goes on instead; only its output to that terminal has no reader left.


@contextlib.contextmanager
def hangup_drops_output(on_hangup: Callable[[], None]) -> Iterator[None]:
    """While active (main thread only), SIGHUP calls `on_hangup` (which drops the output to
    the terminal, told as lost) and the run goes on; SIGINT and SIGTERM keep their meaning.
    A SIGHUP already ignored (`nohup`) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGHUP)
    if previous == signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGHUP, lambda signum, frame: on_hangup())
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL if previous is None else previous)
