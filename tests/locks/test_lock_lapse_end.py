"""A job lock lost before the run let go of it always leaves the run not ok, on the inventory host
whose task took it, in the recap, the exit code and the history; and a lock kept healthy (leases
mixed, the heartbeat under way at the end) is never reported lost."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process
from tests.locks.test_job_lock import _lock_is_free, _lock_with_lease
from tests.locks.test_lock_lapse import LAPSED_1S, _stopped, _stopped_past_the_lease

END_TASK = "TASK [job lock (end of run)]"


def _play(tmp_path: Path, tasks: list[dict[str, Any]], *args: str) -> tuple[int, str]:
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": {"connection": "local"}}}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": tasks}])
    res = cli_subprocess("play", str(pb), "-i", str(inv), *args, cwd=tmp_path)
    return res.rc, res.out + res.err


def test_a_later_lock_with_a_shorter_lease_is_kept_by_the_heartbeat(tmp_path: Path) -> None:
    """Lock A (the default 60 s lease) then lock B with a 1 s lease: the heartbeat, asleep for a
    quarter of A's lease, beats at B's from then on; the run, never stopped, ends ok."""
    tasks = [{"name": "lock A", "job_lock": {"path": str(tmp_path / "a.lock")}},
             {"name": "lock B", "job_lock": {"path": str(tmp_path / "b.lock")}, "vars": {"job_lock_lease": 1}},
             {"name": "wait", "pause": {"seconds": 3}},
             {"name": "after", "command": "true"}]
    code, text = _play(tmp_path, tasks)
    assert code == 0, text
    assert "let go" not in text and "UNREACHABLE" not in text, text
    assert re.search(r"box\s*:\s*ok=4\s+changed=1\s+unreachable=0\s+failed=0", text), text


def test_ignore_unreachable_does_not_turn_a_lapsed_lock_into_an_ok_run(tmp_path: Path) -> None:
    """The release after the lease ran out is UNREACHABLE and ignored (ignore_unreachable): the
    host stays in the play, but the run still does not end ok; the lapse is counted once."""
    unlock = {"name": "unlock", "job_lock": {"path": str(tmp_path / "job.lock"), "state": "unlocked"},
              "ignore_unreachable": True}
    code, text = _stopped_past_the_lease(tmp_path, [unlock])
    assert code == 3, text
    assert re.search(r"fatal: \[box\]: UNREACHABLE! => " + LAPSED_1S.pattern + r".*\n\.\.\.ignoring", text), text
    assert END_TASK in text, text
    assert re.search(r"box\s*:.*unreachable=1\s+failed=0\s+skipped=0\s+rescued=0\s+ignored=1", text), text


def test_a_lapse_found_at_the_end_is_in_the_history_and_the_json_events(tmp_path: Path) -> None:
    """Found only as the run ends, the lapse is a task result like any other: a row of the run's
    history (opsrunner show) and a task_end event, UNREACHABLE on the host."""
    env = {"OPSRUNNER_HISTORY": str(tmp_path / "history.db")}
    events = tmp_path / "events.jsonl"
    code, text = _stopped_past_the_lease(tmp_path, [], "--json-events", str(events), env=env)
    assert code == 3, text
    ends = [e for e in map(json.loads, events.read_text().splitlines()) if e["event"] == "task_end"]
    assert [(e["task"], e["host"], e["status"]) for e in ends][-1] == ("job lock (end of run)", "box", "unreachable")
    assert LAPSED_1S.search(ends[-1]["msg"]), ends
    runs = json.loads(cli_subprocess("history", "--json", env=env).out)
    assert [r["exit_code"] for r in runs] == [3], runs
    shown = cli_subprocess("show", runs[0]["id"], env=env).out
    assert re.search(r"unreachable: \[box\] job lock \(end of run\) .*\n\s+" + LAPSED_1S.pattern, shown), shown


def test_a_lock_taken_under_become_is_reported_on_its_inventory_host(tmp_path: Path) -> None:
    """become (su, as root) runs on a connection of its own: a lapse of the lock it took is the
    inventory host's, in the recap as in the result, never a host `box#become`."""
    code, text = _stopped_past_the_lease(tmp_path, [], lock_task={"become": True, "become_method": "su"})
    assert code == 3, text
    assert "#become" not in text, text
    assert re.search(r"fatal: \[box\]: UNREACHABLE! => " + LAPSED_1S.pattern, text), text
    assert re.search(r"^box\s*:\s*ok=2\s+changed=0\s+unreachable=1", text, re.MULTILINE), text


@pytest.mark.parametrize("value", ["1e300", "0.001", "86401"])
def test_a_job_lock_lease_out_of_bounds_is_refused_before_the_run(tmp_path: Path, value: str) -> None:
    lock = tmp_path / "job.lock"
    code, text = _play(tmp_path, [{"name": "lock", "job_lock": {"path": str(lock)}}], "-e", f"job_lock_lease={value}")
    assert code == 4, text
    assert re.search(r"pb\.yml:\d+:\d+: variable job_lock_lease \(the lease of the job lock this job_lock task "
                     rf"takes\): must be from 1 to 86400 seconds, got '{re.escape(value)}' \(at job_lock_lease\)",
                     text), text
    assert not lock.exists()  # nothing was run


class _HalfOpen:
    """The agent's stream after a suspend that broke the connection: nothing comes back, and the
    EOF only after `delay` seconds."""

    def __init__(self, real: Any, delay: float) -> None:
        self.real, self.delay = real, delay
        self.reading = threading.Event()

    def send(self, data: bytes) -> None:
        pass

    def recv(self, size: int, timeout: float | None) -> bytes:
        self.reading.set()
        time.sleep(self.delay)
        return b""

    def alive(self) -> bool:
        return True

    def close(self, wait_exit: bool = False) -> bool:
        return bool(self.real.close(wait_exit))

    def exit_text(self) -> str:
        return ""


def test_the_end_of_the_run_waits_for_a_heartbeat_that_finds_the_locks_gone(tmp_path: Path) -> None:
    """The run ends while a heartbeat is under way on a stream that ends without an answer: the
    end waits for it, and its finding (the locks went with the agent) is what the run reports."""
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 1)
    try:
        session.keep_leased(3600)  # the heartbeat comes only when woken below (as after a pause)
        session.hold(str(lock), 1, "box")
        assert wait_for(lambda: _lock_is_free(lock), 15)  # no beat reached it yet: the agent let it go
        session._stream = stream = _HalfOpen(session._stream, 1.0)
        session._wake.set()  # the heartbeat: now, on the stream that will end
        assert stream.reading.wait(10)
    finally:
        factory.close_all()  # the run's end, the heartbeat under way
    assert list(factory.lost_job_locks) == ["box"], factory.lost_job_locks
    why, told = factory.lost_job_locks["box"]
    assert not told and f"the job lock at {lock} was" in why, why


def test_an_agent_that_died_is_not_reported_as_a_lapse(tmp_path: Path) -> None:
    """The agent was killed (not a pause of the controller): the end of the run says so, and that
    the lock went with it, not that the controller went quiet past the lease."""
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 60)
    try:
        session.hold(str(lock), 60, "box")
        os.kill(session.pid, signal.SIGKILL)
        assert wait_for(lambda: not session._stream.alive(), 15)
    finally:
        factory.close_all()
    why, told = factory.lost_job_locks["box"]
    assert not told, why
    assert re.match(rf"the job lock at {re.escape(str(lock))} was no longer held: the remote agent that held it had "
                    r"ended \(.+\), and the target lets a job lock go with its agent: another run may have acted on "
                    r"the job since\. Found at the end of the run: the host is unreachable in its recap and the run "
                    r"does not end ok$", why), why
    assert "no word from this controller" not in why, why


def _stopped_during(tmp_path: Path, tasks: list[dict[str, Any]], host: dict[str, Any],
                    stopped_s: float) -> tuple[int, str]:
    """A job lock with a 1 s lease, then `tasks`, the first of them (or of its block) named
    `step`: the controller is stopped 0.5 s into it until the lock is free and `stopped_s`
    more. (exit code, output)."""
    lock = tmp_path / "job.lock"
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": host}}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "lock", "job_lock": {"path": str(lock)}}, *tasks]}])
    log = tmp_path / "out.log"
    with log.open("w") as out, opsrunner_process("play", str(pb), "-i", str(inv), "-e", "job_lock_lease=1",
                                                 cwd=tmp_path, stdout=out) as run:
        assert wait_for(lambda: "TASK [step]" in log.read_text(), 30), log.read_text()
        time.sleep(0.5)
        with _stopped(run):
            assert wait_for(lambda: _lock_is_free(lock), 15)
            time.sleep(stopped_s)
        run.communicate(timeout=30)
    return run.returncode, log.read_text()


BARE = {"connection": "local", "command_exec": "bare"}


def test_a_bare_exec_result_after_the_lease_ran_out_is_not_reported(tmp_path: Path) -> None:
    """`command_exec: bare`: the command's result, read after a stop past the lease, is confirmed
    with the agent first: the lock is gone, the host unreachable, no later task runs there."""
    marker = tmp_path / "later.out"
    # the command ends while the controller is stopped: its result waits for it
    code, text = _stopped_during(tmp_path, [{"name": "step", "shell": "sleep 1; echo restarted"},
                                            {"name": "later", "shell": f"echo ran > {marker}"}], BARE, 2)
    assert code == 3, text
    # Found by the command's own confirmation ("so the command's result is not reported as this
    # host's state") or by the heartbeat that comes first on resume: the step is unreachable either way.
    assert re.search(r"TASK \[step\] \*+\nfatal: \[box\]: UNREACHABLE! => " + LAPSED_1S.pattern, text), text
    assert "changed: [box]" not in text and not marker.exists(), text
    assert re.search(r"box\s*:.*unreachable=1\s+failed=0", text), text


def test_a_bare_exec_timed_out_after_the_lease_ran_out_runs_no_rescue(tmp_path: Path) -> None:
    """A bare command's timeout comes while the controller is stopped past the lease: the host
    is unreachable (not TIMED OUT), and the block's rescue does not act on the job there."""
    marker = tmp_path / "rescue.out"
    block = {"block": [{"name": "step", "shell": "sleep 3", "timeout": 2}],
             "rescue": [{"name": "rescue", "shell": f"echo ran > {marker}"}]}
    code, text = _stopped_during(tmp_path, [block], BARE, 3)  # past the command's timeout
    assert code == 3, text
    assert "TIMED OUT" not in text and not marker.exists(), text
    assert re.search(r"fatal: \[box\]: UNREACHABLE! => " + LAPSED_1S.pattern, text), text
