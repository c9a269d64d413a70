"""arrivals.Arrivals: futures handed out in the order they finish (real threads and futures)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from opsrunner.arrivals import Arrivals


def test_futures_come_out_in_the_order_they_finish() -> None:
    gates = [threading.Event() for _ in range(3)]
    arrivals: Arrivals[int] = Arrivals()
    with ThreadPoolExecutor(3) as pool:
        futures = [arrivals.add(pool.submit(lambda i=i: (gates[i].wait(10), i)[1])) for i in range(3)]
        order = []
        for i in (2, 0, 1):
            gates[i].set()
            (done,) = arrivals.next_batch()
            order.append(done.result())
        assert order == [2, 0, 1]
        assert {f.result() for f in futures} == {0, 1, 2}


def test_a_batch_holds_every_future_finished_meanwhile_and_a_done_one_is_not_lost() -> None:
    arrivals: Arrivals[str] = Arrivals()
    finished: list[Future[str]] = []
    for name in ("a", "b", "c"):
        future: Future[str] = Future()
        future.set_result(name)  # done before it is added
        finished.append(arrivals.add(future))
    assert [f.result() for f in arrivals.next_batch()] == ["a", "b", "c"]
