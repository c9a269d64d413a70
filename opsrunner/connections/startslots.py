"""How many hosts of one run may be starting their connection (and agent) at once.

A start is the costly part of a host's run: key exchange and authentication on the
controller, sshd's fork and the agent's Python on the target, and a bastion's MaxStartups
in between. With `-f 500`, 500 starts at once share the controller's CPU and its one GIL:
each then takes about as long as all of them together, and hosts that refused nothing pass
their connect_timeout and are reported unreachable (bench/RESULTS.md, run 23). So a start
waits for a slot first, and connect_timeout counts from the moment it has one: the time a
host waits for its turn is this controller's, not the host's. Once started, hosts run their
tasks `forks` at a time as before. When the run's connections are closed (its end, Ctrl-C),
the hosts still waiting are not started.

A thread that holds a slot and starts a nested step (the agent's start opens the connection
it runs on) uses the slot it holds: a nested wait could deadlock once every slot is held.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from opsrunner.errors import ConnectionFailed

#: The default number of starts at once: enough to keep a fleet's round trips overlapped
#: (a start costs the controller ~15-25 ms of CPU; 32 at once are ~0.5-0.8 s of it), few
#: enough that none waits seconds for its share of the CPU.
DEFAULT_START_SLOTS = 32


class StartsClosed(ConnectionFailed):
    """The run is ending (its connections were closed, Ctrl-C): a host still waiting for its
    turn is not started."""


class StartSlots:
    """A counting limit on starts, shared by the connections of one run, closed with them."""

    def __init__(self, limit: int = DEFAULT_START_SLOTS) -> None:
        if limit < 1:
            raise ValueError("the number of connection start slots must be at least 1")
        self.limit = limit
        self._free = limit
        self._closed = False
        self._changed = threading.Condition()
        self._holding = threading.local()

    @contextlib.contextmanager
    def held(self, deadline: float | None = None) -> Iterator[None]:
        """Hold a slot for the block (the one this thread holds already, if any). TimeoutError
        where `deadline` (time.monotonic()) passes before one is free; StartsClosed once the
        run's connections are closed."""
        if getattr(self._holding, "depth", 0):
            self.ensure_open()  # a start's later step (a reconnect, a retry) stops at the close too
            self._holding.depth += 1
            try:
                yield
            finally:
                self._holding.depth -= 1
            return
        self._take(deadline)
        self._holding.depth = 1
        try:
            yield
        finally:
            self._holding.depth = 0
            with self._changed:
                self._free += 1
                self._changed.notify()

    def _take(self, deadline: float | None) -> None:
        with self._changed:
            while self._free == 0 and not self._closed:
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    raise TimeoutError("no connection start slot became free in time")
                self._changed.wait(wait)
            self.ensure_open()
            self._free -= 1

    def ensure_open(self) -> None:
        """StartsClosed once the run's connections are closed: what a start that was under way
        then checks before it tries again another way."""
        if self._closed:
            raise StartsClosed("not connected: the run is ending (its connections were closed)")

    def close(self) -> None:
        """No more starts: hosts waiting for a slot, and any later start, get StartsClosed."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
