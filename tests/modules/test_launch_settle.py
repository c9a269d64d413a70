"""launch_detached's `settle`: how long the launch watches its new job before it reports it
launched. A job that ends within it fails the launch with its exit status; with `settle: 0`
the launch returns at the exec's handshake, and a verify after it diagnoses the exit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_bad_input import PLAY, Trap, run_bad
from tests.modules.conftest import Target


@pytest.fixture(scope="module")
def trap() -> Iterator[Trap]:
    listener = Trap()
    yield listener
    listener.close()


def _paths(target: Target) -> tuple[str, str]:
    return str(target.work / "t.log"), str(target.work / "t.pid")


def test_a_longer_settle_catches_a_job_that_ends_after_the_default_watch(edge_target: Target) -> None:
    log, pid = _paths(edge_target)
    # Ends 0.6 s or more after its exec: after the default watch (0.25 s), inside this one.
    launch = {"command": "echo starting; sleep 0.6; echo boom; exit 7", "log": log, "pidfile": pid, "settle": 8}
    run = edge_target.play([{"name": "launch", "launch_detached": launch}])
    assert run.rc == 2, run.out
    msg = run.end("launch")["msg"]
    assert "; it exited at once with code 7" in msg and "  | boom" in msg, msg


def test_settle_0_reports_the_job_launched_and_verify_diagnoses_its_exit(edge_target: Target) -> None:
    log, pid = _paths(edge_target)
    launch = {"command": "echo starting; sleep 3; echo boom; exit 7", "log": log, "pidfile": pid, "settle": 0}
    verify = {"pidfile": pid, "processes": 1, "log": log, "stable_for": 10}
    run = edge_target.play([{"name": "launch", "launch_detached": launch},
                            {"name": "verify", "verify": verify, "timeout": 60}])
    assert run.rc == 2, run.out
    assert run.end("launch")["status"] == "changed", run.end("launch")
    assert run.end("launch")["msg"].startswith("launched pid "), run.end("launch")["msg"]
    msg = run.end("verify")["msg"]
    assert "exited with code 7" in msg and "  | boom" in msg, msg


@pytest.mark.parametrize("value,message", [
    ("-1", "-1 is less than the minimum of 0"),
    ("11", "11 is greater than the maximum of 10"),
    ("soon", "'soon' is not a number"),
])
def test_a_bad_settle_is_refused_before_any_host_is_touched(tmp_path: Path, trap: Trap, value: str,
                                                          message: str) -> None:
    playbook = PLAY + f"  tasks:\n    - launch_detached: {{argv: [sleep, '1'], settle: {value}}}\n"
    res = run_bad(tmp_path, trap, playbook)
    assert res.rc == 4, res.err
    assert "pb.yml:3:" in res.err and "settle" in res.err and message in res.err, res.err
