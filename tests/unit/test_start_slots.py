"""connections/startslots.py: the limit on hosts starting at once (real threads, no fakes)."""

from __future__ import annotations

import threading
import time

import pytest

from opsrunner.connections.startslots import StartsClosed, StartSlots


def test_no_more_than_the_limit_hold_a_slot_at_once() -> None:
    slots = StartSlots(2)
    inside, most, lock = [0], [0], threading.Lock()

    def start() -> None:
        with slots.held():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 2


def test_a_nested_start_uses_the_slot_its_thread_holds() -> None:
    """The agent's start opens its connection inside its own slot: with one slot, no deadlock."""
    slots = StartSlots(1)
    done = []

    def start() -> None:
        with slots.held(), slots.held(time.monotonic() + 1):
            done.append(True)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(5)
    assert done == [True]
    with slots.held(time.monotonic() + 1):  # and the slot is free again afterwards
        pass


def test_a_deadline_that_passes_while_waiting_is_a_timeout() -> None:
    slots = StartSlots(1)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with slots.held():
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    started = time.monotonic()
    with pytest.raises(TimeoutError), slots.held(time.monotonic() + 0.2):
        pass
    assert 0.15 < time.monotonic() - started < 3
    release.set()
    holder.join()


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        StartSlots(0)


def test_closing_stops_the_waiting_and_every_later_start() -> None:
    slots = StartSlots(1)
    taken, release = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def hold() -> None:
        with slots.held():
            taken.set()
            release.wait(5)

    def wait_for_a_slot() -> None:
        try:
            with slots.held():
                outcome.append(AssertionError("started after the close"))
        except StartsClosed as exc:
            outcome.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    waiter = threading.Thread(target=wait_for_a_slot)
    waiter.start()
    time.sleep(0.1)
    slots.close()
    waiter.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], StartsClosed), outcome
    release.set()
    holder.join()
    with pytest.raises(StartsClosed), slots.held():
        pass
