"""Futures taken in the order they finish, at O(1) a completion.

`concurrent.futures.wait(pending, FIRST_COMPLETED)` in a loop registers a waiter on every
pending future and removes it again at each call: O(n) per completion, O(n^2) per task. At
500 hosts that was ~6 s of controller CPU in a 10-task run (bench/RESULTS.md, run 23).
Here each future puts itself on a queue when it finishes.
"""

from __future__ import annotations

import queue
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class Arrivals(Generic[T]):
    """The futures added, handed out as they finish."""

    def __init__(self) -> None:
        self._finished: queue.SimpleQueue[Future[T]] = queue.SimpleQueue()

    def add(self, future: Future[T]) -> Future[T]:
        future.add_done_callback(self._finished.put)  # (called at once if it is done already)
        return future

    def next_batch(self) -> list[Future[T]]:
        """Wait for one to finish; it and every other that has finished meanwhile."""
        batch = [self._finished.get()]
        while True:
            try:
                batch.append(self._finished.get_nowait())
            except queue.Empty:
                return batch
