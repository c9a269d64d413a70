"""Work a thread puts off until it next waits on a target.

Run on one host, a task's reporting (its result line and history row, the flush, the next
task's banner) went on the engine's thread before the next request was sent: ~5% of a task's
time with nothing else to do. Put off here (PlayRun.put_off), it runs once the next request is
on its way and the target works on it (AgentSession.call), or before anything that may take a
while first (an agent to start, a bare command), or before any other event is reported
(PlayRun.emit): the reporters see the same events in the same order.

Each thread has its own queue: what the engine's thread puts off runs on that thread only.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

_local = threading.local()


def _queue() -> deque[Callable[[], None]]:
    queue: deque[Callable[[], None]] | None = getattr(_local, "queue", None)
    if queue is None:
        queue = _local.queue = deque()
    return queue


def put_off(work: Callable[[], None]) -> None:
    """Run `work` (after what is already put off) when this thread next waits or reports."""
    _queue().append(work)


def pending() -> bool:
    queue = getattr(_local, "queue", None)
    return bool(queue) or getattr(_local, "kept", None) is not None


def run(keep_errors: bool = False) -> None:
    """Run what this thread put off, in order. With `keep_errors` (a request is in flight), the
    first error of a piece of work is kept, and the work after it left queued, until
    raise_kept(); otherwise a kept error is raised first. Ctrl-C and exits are never kept."""
    queue = getattr(_local, "queue", None)
    if not keep_errors:
        raise_kept()
    elif getattr(_local, "kept", None) is not None:
        return
    while queue:
        work = queue.popleft()
        if not keep_errors:
            work()
            continue
        try:
            work()
        except Exception as exc:
            _local.kept = exc
            return


def raise_kept() -> None:
    """Raise the error that run(keep_errors=True) kept, if any: once the request is answered."""
    kept: Exception | None = getattr(_local, "kept", None)
    if kept is not None:
        _local.kept = None
        raise kept
