"""taskrun.switch_interval_for: a run of many host threads switches the GIL less often, and the
process's setting is back as it was after the run, also after a failure."""

from __future__ import annotations

import sys

import pytest

from opsrunner.taskrun import MANY_HOST_THREADS, MANY_THREADS_SWITCH_INTERVAL_S, switch_interval_for


def test_many_host_threads_get_the_longer_interval_for_the_run_only() -> None:
    before = sys.getswitchinterval()
    with switch_interval_for(MANY_HOST_THREADS):
        assert sys.getswitchinterval() == pytest.approx(max(before, MANY_THREADS_SWITCH_INTERVAL_S))
    assert sys.getswitchinterval() == before


def test_fewer_host_threads_leave_it_alone() -> None:
    before = sys.getswitchinterval()
    with switch_interval_for(MANY_HOST_THREADS - 1):
        assert sys.getswitchinterval() == before
    assert sys.getswitchinterval() == before


def test_it_is_put_back_after_a_run_that_raised() -> None:
    before = sys.getswitchinterval()
    with pytest.raises(RuntimeError), switch_interval_for(500):
        raise RuntimeError("the run failed")
    assert sys.getswitchinterval() == before
