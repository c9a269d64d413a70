"""How many hosts of one run may be starting their connection (and agent) at once.

A start is the costly part of a host's run: key exchange and authentication on the
controller, sshd's fork and the agent's Python on the target, and a bastion's MaxStartups
in between. With `-f 500`, 500 starts at once share the controller's CPU and its one GIL:
each then takes about as long as all of them together, and hosts that refused nothing pass
their connect_timeout and are reported unreachable (bench/RESULTS.md, run 23). So a start
waits for a slot first, and connect_timeout counts from the moment it has one: the time a
host waits for its turn is this controller's, not the host's. Once started, hosts run their
tasks `forks` at a time as before.

A thread that holds a slot and starts a nested step (the agent's start opens the connection
it runs on) uses the slot it holds: a nested wait could deadlock once every slot is held.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

#: The default number of starts at once: enough to keep a fleet's round trips overlapped
#: (a start costs the controller ~15-25 ms of CPU; 32 at once are ~0.5-0.8 s of it), few
#: enough that none waits seconds for its share of the CPU.
DEFAULT_START_SLOTS = 32


class StartSlots:
    """A counting limit on starts, shared by the connections of one run."""

    def __init__(self, limit: int = DEFAULT_START_SLOTS) -> None:
        if limit < 1:
            raise ValueError("the number of connection start slots must be at least 1")
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)
        self._holding = threading.local()

    @contextlib.contextmanager
    def held(self, deadline: float | None = None) -> Iterator[None]:
        """Hold a slot for the block (the one this thread holds already, if any). TimeoutError
        where `deadline` (time.monotonic()) passes before one is free."""
        if getattr(self._holding, "depth", 0):
            self._holding.depth += 1
            try:
                yield
            finally:
                self._holding.depth -= 1
            return
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._free.acquire(timeout=wait):
            raise TimeoutError("no connection start slot became free in time")
        self._holding.depth = 1
        try:
            yield
        finally:
            self._holding.depth = 0
            self._free.release()
