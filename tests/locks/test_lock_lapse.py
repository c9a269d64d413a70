"""A controller stopped (SIGSTOP) past its job lock's lease: the target lets the lock go, another
run restarts the job, and the stopped run, resumed, reports nothing more of that host as if it
still held the lock (the reply that waited for it while it was stopped least of all)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from opsrunner.connections.agent import JobLocksLost
from opsrunner.connections.base import ConnectionSpec
from opsrunner.locks.job_lock import release_job_lock
from tests.conftest import pids_with, wait_for, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process
from tests.locks.test_job_lock import _inventory, _lock_is_free, _lock_with_lease, demo  # noqa: F401 (the fixture)

LAPSED = re.compile(r"the job lock at (\S+) was let go after no word from this controller for (\d+)s, past the "
                    r"lock's lease of 2s \(e\.g\. the controller was stopped or suspended\): another run may have "
                    r"acted on the job since")

LAPSED_1S = re.compile(LAPSED.pattern.replace("2s", "1s"))


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextlib.contextmanager
def _stopped(proc: subprocess.Popen[str]) -> Iterator[None]:
    """SIGSTOP the controller the test started (by pid); SIGCONT it whatever happens next."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(proc.pid, signal.SIGCONT)


def _history(env: dict[str, str]) -> list[dict[str, object]]:
    res = cli_subprocess("history", "--json", env=env)
    assert res.rc == 0, res.err
    return list(json.loads(res.out))


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_a_reply_read_after_a_pause_past_the_lease_is_not_reported(tmp_path: Path, demo: Path,  # noqa: F811
                                                                   transport: str,
                                                                   request: pytest.FixtureRequest) -> None:
    """Run A is stopped mid-verify: the verify's reply waits for it (in the pipe, or the ssh
    channel) while its lease runs out and run B restarts the job. Resumed, run A confirms with
    its agent before it takes the reply, finds the lock gone and leaves the host: B's job runs on."""
    host = {"connection": "local"} if transport == "local" else request.getfixturevalue("sshd").host_vars()
    inv = _inventory(tmp_path, demo, host, verify_stable_for=3, log_grows_within=0)
    env = {"OPSRUNNER_HISTORY": str(tmp_path / "history.db")}
    log = tmp_path / "a.log"
    with log.open("w") as out, opsrunner_process("play", "restart_training.yml", "-i", str(inv), "-e",
                                                 '{"job_lock_lease": 2}', env=env, stdout=out) as run_a:
        assert wait_for(lambda: "TASK [Verify" in log.read_text(), 60), log.read_text()
        time.sleep(1)  # into verify: its reply comes, and the lease runs out, while run A is stopped
        with _stopped(run_a):
            # Run B waits for the lock, which comes free when A's agent lets it go at the lease.
            run_b = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e",
                                   '{"lock_timeout": 60, "verify_stable_for": 1}', env=env)
            assert run_b.rc == 0, run_b.out
            assert "killed 1:" in run_b.out, run_b.out  # run A's job
        job_b = int((demo / "train.pid").read_text())
        run_a.communicate(timeout=60)
    text = log.read_text()
    assert run_a.returncode == 3, text
    lapsed = LAPSED.search(text)
    assert lapsed and lapsed.group(1) == str(demo / "train.lock") and int(lapsed.group(2)) >= 2, text
    assert "so the reply to 'verify' is not reported as this host's state" in text, text
    assert re.search(r"fatal: \[gpu-box\]: UNREACHABLE!", text), text
    assert "all checks passed" not in text and "released" not in text, text
    assert re.search(r"gpu-box\s*:.*unreachable=1\s+failed=0", text), text
    # A did nothing more on that host: B's job runs on, alone, and the lock is free.
    assert _alive(job_b) and pids_with(f"{demo}/code/train.py") == [job_b]
    assert _lock_is_free(demo / "train.lock")
    runs = _history(env)
    assert sorted(r["exit_code"] for r in runs) == [0, 3], runs


def test_a_verify_longer_than_the_lease_keeps_its_lock_without_extra_requests(tmp_path: Path, demo: Path) -> None:  # noqa: F811
    """A request in flight renews the lease: a verify of 5 s under a lease of 2 s passes, holds
    the lock throughout, and no confirmation is asked of the agent (-vvv shows every request)."""
    inv = _inventory(tmp_path, demo, {"connection": "local"}, verify_stable_for=5, log_grows_within=0)
    res = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e", '{"job_lock_lease": 2}', "-vvv")
    assert res.rc == 0, res.out
    assert "all checks passed" in res.out and f"released {demo / 'train.lock'}" in res.out, res.out
    assert "job_held" not in res.out and "let go" not in res.out, res.out


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_a_bad_job_lock_lease_is_refused_before_the_run(tmp_path: Path, demo: Path, value: str) -> None:  # noqa: F811
    inv = _inventory(tmp_path, demo, {"connection": "local"})
    res = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e", f"job_lock_lease={value}")
    assert res.rc == 4, res.out + res.err
    assert re.search(r"roles/training_restart/tasks/main\.yml:\d+:\d+: variable job_lock_lease \(the lease of the "
                     rf"job lock this job_lock task takes\): must be a positive number of seconds, got '{value}' "
                     r"\(at job_lock_lease\)", res.err), res.err
    assert not demo.exists()  # nothing was run


def _stopped_past_the_lease(tmp_path: Path, after: list[dict[str, object]], *args: str,
                            lock_task: dict[str, object] | None = None,
                            env: dict[str, str] | None = None) -> tuple[int, str]:
    """A local play that takes a job lock with a 1 s lease (`lock_task`'s keywords added to its
    task), then pauses 3 s (then `after`); its controller (with `args`) stopped during the pause
    until the lock is free. (exit code, output)."""
    lock = tmp_path / "job.lock"
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": {"connection": "local"}}}})
    tasks = [{"name": "lock", "job_lock": {"path": str(lock)}, **(lock_task or {})},
             {"name": "wait", "pause": {"seconds": 3}}, *after]
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": tasks}])
    log = tmp_path / "out.log"
    with log.open("w") as out, opsrunner_process("play", str(pb), "-i", str(inv), "-e", "job_lock_lease=1", *args,
                                                 cwd=tmp_path, env=env, stdout=out) as run:
        assert wait_for(lambda: "TASK [wait]" in log.read_text(), 30), log.read_text()
        with _stopped(run):
            assert wait_for(lambda: _lock_is_free(lock), 15)
        run.communicate(timeout=30)
    return run.returncode, log.read_text()


def test_a_play_ending_after_its_lock_lapsed_does_not_end_ok(tmp_path: Path) -> None:
    """The lock lapses after the host's last task (the controller stopped before the run's end):
    the end of the run finds it gone, and the host is unreachable in the recap and the exit code."""
    code, text = _stopped_past_the_lease(tmp_path, [])
    assert code == 3, text
    assert "TASK [job lock (end of run)]" in text, text
    assert re.search(r"fatal: \[box\]: UNREACHABLE! => " + LAPSED_1S.pattern, text), text
    assert re.search(r"box\s*:.*unreachable=1", text), text


def test_a_release_of_a_lock_the_agent_lost_is_not_ok(tmp_path: Path) -> None:
    """`state: unlocked` after the lease ran out (the controller stopped between tasks): the agent
    that would answer is a new one, holding nothing; the release is the lost lock, not ok."""
    unlock = {"name": "unlock", "job_lock": {"path": str(tmp_path / "job.lock"), "state": "unlocked"}}
    code, text = _stopped_past_the_lease(tmp_path, [unlock])
    assert code == 3, text
    assert "released" not in text, text
    assert re.search(r"fatal: \[box\]: UNREACHABLE! => .*" + LAPSED_1S.pattern, text), text


def test_a_release_that_finds_the_agent_gone_is_the_lost_lock_not_a_release(tmp_path: Path) -> None:
    """The agent let the lock go at its lease and exited; the release's request would start a new
    agent, which holds nothing: it is JobLocksLost (the host unreachable), not `released (not held)`."""
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 1)
    try:
        session.keep_leased(3600)  # no heartbeat within the test, as in a pause
        session.hold(str(lock), 1)  # as take_job_lock records it
        assert wait_for(lambda: _lock_is_free(lock), 15)
        assert wait_for(lambda: not session._stream.alive(), 15)  # the agent exited at the lease
        conn = factory.get(ConnectionSpec(name="t", kind="local"))
        with pytest.raises(JobLocksLost, match=LAPSED_1S.pattern):  # (its lease, 1 s, as hold() recorded it)
            release_job_lock(conn, str(lock))
        with pytest.raises(JobLocksLost):  # and every later request on that host
            session.call("beat", {})
        assert _lock_is_free(lock)  # no new agent took it again
    finally:
        factory.close_all()
