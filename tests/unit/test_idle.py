"""idle.py: work a thread puts off runs in order, on that thread, and its errors surface."""

from __future__ import annotations

import threading

import pytest

from opsrunner import idle


def test_put_off_work_runs_in_order_on_its_own_thread() -> None:
    done: list[str] = []
    idle.put_off(lambda: done.append("a"))
    idle.put_off(lambda: done.append("b"))
    other = threading.Thread(target=idle.run)  # another thread's queue is its own
    other.start()
    other.join()
    assert done == [] and idle.pending()
    idle.run()
    assert done == ["a", "b"] and not idle.pending()


def test_an_error_kept_while_a_request_is_in_flight_is_raised_after_it() -> None:
    done: list[str] = []

    def broken() -> None:
        raise OSError("reporter failed")

    idle.put_off(broken)
    idle.put_off(lambda: done.append("after"))
    idle.run(keep_errors=True)  # the request's wait: nothing raised there
    assert done == [] and idle.pending()
    with pytest.raises(OSError, match="reporter failed"):
        idle.raise_kept()
    idle.run()
    assert done == ["after"] and not idle.pending()


def test_a_kept_error_is_raised_before_any_more_work_runs() -> None:
    done: list[str] = []

    def broken() -> None:
        raise ValueError("boom")

    idle.put_off(broken)
    idle.run(keep_errors=True)
    idle.put_off(lambda: done.append("later"))
    with pytest.raises(ValueError, match="boom"):
        idle.run()
    assert done == []
    idle.run()
    assert done == ["later"]
