"""SIGTERM is handled like Ctrl-C: the engine stops in-flight commands (closing their
channels, so the watchdogs on the targets kill the remote trees), prints the recap and
writes the JSON recap event; the exit code is 143."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
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
