"""verify never passes growth it could not judge, whatever stable_for, log_grows and within are.

A hang shows only log_grows seconds after it began, so a job that hangs during stable_for must
still be caught: the stable period is stable_for + log_grows once the checks first pass. Each
combination runs with a job that hangs right after it comes up and with a healthy one.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from tests.conftest import kill_marked, sleep_marker
from tests.modules.conftest import Target, _target_for

#: (stable_for, log_grows, within): below, equal to, above; no growth check; within below log_grows.
WINDOWS = [(1, 2, 10), (2, 2, 10), (4, 2, 10), (2, 0, 10), (1, 3, 1)]


@pytest.fixture
def local_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


def _restart(target: Target, token: str, stable_for: float, log_grows: float, within: float,
             *trainer_args: str) -> tuple[int, dict[str, object], str]:
    log, pidfile = str(target.work / "t.log"), str(target.work / "t.pid")
    verify: dict[str, object] = {"pidfile": pidfile, "processes": 1, "log": log, "log_min_bytes": 1,
                                 "within": within, "stable_for": stable_for}
    if log_grows:
        verify["log_grows"] = log_grows
    command = target.trainer_command(token, target.work / "ck.json", "--step-time", "0.1", *trainer_args)
    run = target.play([{"name": "launch", "launch_detached": {"command": command, "log": log, "pidfile": pidfile}},
                       {"name": "verify", "verify": verify, "timeout": 60}])
    try:
        return run.rc, run.end("verify"), run.out
    finally:
        if Path(pidfile).exists():
            with_pid = int(Path(pidfile).read_text())
            with contextlib.suppress(ProcessLookupError):
                os.kill(with_pid, signal.SIGKILL)
        kill_marked(token)


@pytest.mark.parametrize(("stable_for", "log_grows", "within"), WINDOWS)
def test_a_job_that_hangs_right_after_it_comes_up_never_passes(local_target: Target, stable_for: float,
                                                               log_grows: float, within: float) -> None:
    # The trainer logs 3 steps (0.3 s) after its ready line, then sleeps for ever.
    rc, end, out = _restart(local_target, sleep_marker(), stable_for, log_grows, within, "--hang-after", "3")
    if not log_grows:  # no growth check asked for: nothing tells a hang, and the status says how stale
        assert rc == 0, out
        assert end["data"]["log_age_s"] >= stable_for - 0.5, end
        return
    assert rc == 2, out
    assert end["data"]["state"] == "hung", end["msg"]
    assert "diagnosis: hung: the job (pid " in end["msg"]
    assert f"log_grows: expected grows within every {log_grows}s, got last grew" in end["msg"]


@pytest.mark.parametrize(("stable_for", "log_grows", "within"), WINDOWS)
def test_a_healthy_job_passes_after_the_whole_stable_period(local_target: Target, stable_for: float,
                                                            log_grows: float, within: float) -> None:
    rc, end, out = _restart(local_target, sleep_marker(), stable_for, log_grows, within)
    assert rc == 0, out
    assert end["status"] == "ok", end["msg"]
    assert end["msg"].startswith("all checks passed"), end["msg"]
    # Watched through stable_for, and one full growth window more where log_grows is asked.
    assert end["duration_s"] >= stable_for + log_grows, end["duration_s"]
