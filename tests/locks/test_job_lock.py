"""The job lock for real: concurrent restarts over ssh through the hostile wrapper rig, a
SIGKILLed controller, Ctrl-C, a stale holder record, and the agent's lease on its locks."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from opsrunner.connections.agent import JobLocksLost
from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.errors import ModuleFailure
from opsrunner.locks.holder import LockHolder
from opsrunner.locks.job_lock import holds_job_lock, release_job_lock, take_job_lock
from tests.conftest import FD_HOLDER, REAPER, ROOT, kill_marked, pids_with, wait_for, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process
from tests.sshd import PrivateSSHD


def _inventory(tmp_path: Path, demo: Path, host_vars: dict[str, Any], **overrides: Any) -> Path:
    role_vars = {
        "code_src": str(ROOT / "examples" / "demo_trainer"), "code_dest": f"{demo}/code",
        "cache_paths": [f"{demo}/cache"], "pidfile": f"{demo}/train.pid", "log_path": f"{demo}/train.log",
        "kill_pattern": f"{demo}/code/train\\.py", "kill_grace": 10,
        "train_command": f"{sys.executable} -u {demo}/code/train.py --checkpoint {demo}/ck.json "
                         f"--cache-dir {demo}/cache",
        "ready_regex": "ready: training", "log_grows_within": 2, "verify_within": 30,
        "verify_stable_for": 2, "wait_gpu_free": 0,
    }
    role_vars.update(overrides)
    return write_yaml(tmp_path / "inv.yml", {"all": {"children": {"trainers": {
        "hosts": {"gpu-box": host_vars}, "vars": role_vars}}}})


def _play(*args: str) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    """`opsrunner play restart_training.yml ARGS` running while the block runs; ended by pid
    (helpers.stop) when it ends, whatever the test did to it."""
    return opsrunner_process("play", "restart_training.yml", *args)


def _record(lock: Path) -> dict[str, Any] | None:
    try:
        text = lock.read_text()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def _keeper_alive(lock: Path) -> bool:
    record = _record(lock)
    return bool(record) and Path(f"/proc/{record['keeper_pid']}").exists()  # type: ignore[index]


def _lock_is_free(lock: Path) -> bool:
    with lock.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


@pytest.fixture
def demo(tmp_path: Path):
    d = tmp_path / "demo"
    yield d
    kill_marked(str(d))


def _ready_lines(demo: Path) -> int:
    return len(re.findall(r"ready: training demo started", (demo / "train.log").read_text()))


def test_two_concurrent_restarts_one_job_one_locked_by(tmp_path: Path, sshd: PrivateSSHD, demo: Path) -> None:
    inv = _inventory(tmp_path, demo, sshd.host_vars(wrapper=[REAPER, FD_HOLDER]))
    with _play("-i", str(inv)) as one, _play("-i", str(inv)) as two:
        runs = [one, two]
        outs = [p.communicate(timeout=240)[0] for p in runs]
    codes = sorted(p.returncode for p in runs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in runs].index(2)]
    assert re.search(r"locked by \S+@\S+ \(opsrunner pid \d+, playbook \S*restart_training\.yml, "
                     r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\): another run is restarting this job", loser), loser
    assert "TASK [Deploy" not in loser  # the losing run changed nothing on the target
    assert wait_for(lambda: len(pids_with(f"{demo}/code/train.py")) == 1, 5)
    assert _ready_lines(demo) == 1
    assert _lock_is_free(demo / "train.lock")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_controller_leaves_a_lock_the_next_run_takes(tmp_path: Path, sshd: PrivateSSHD, demo: Path,
                                                            sig: signal.Signals) -> None:
    inv = _inventory(tmp_path, demo, sshd.host_vars(wrapper=[REAPER, FD_HOLDER]), verify_stable_for=120,
                     verify_within=150)
    lock = demo / "train.lock"
    with _play("-i", str(inv)) as first:
        # Killed mid-verify: after the launch has finished (its pidfile written; a launch still in
        # flight is stopped with its job, as every in-flight request is), while it holds the lock.
        assert wait_for(lambda: _keeper_alive(lock) and len(pids_with(f"{demo}/code/train.py")) == 1
                        and (demo / "train.pid").exists(), 60)
        time.sleep(0.5)  # into verify
        keeper = _record(lock)["keeper_pid"]  # type: ignore[index]
        first.send_signal(sig)
        first.communicate(timeout=30)
    assert wait_for(lambda: not Path(f"/proc/{keeper}").exists(), 15), "the keeper outlived its controller"
    second = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e", "{\"verify_stable_for\": 1}")
    assert second.rc == 0, second.out
    assert "killed 1:" in second.out, second.out  # the first run's job, stopped by the second run
    assert wait_for(lambda: len(pids_with(f"{demo}/code/train.py")) == 1, 5)
    assert _ready_lines(demo) == 2


def test_ctrl_c_releases_the_lock(tmp_path: Path, sshd: PrivateSSHD, demo: Path) -> None:
    inv = _inventory(tmp_path, demo, sshd.host_vars(wrapper=[REAPER, FD_HOLDER]), verify_stable_for=120,
                     verify_within=150)
    lock = demo / "train.lock"
    with _play("-i", str(inv)) as run:
        assert wait_for(lambda: _keeper_alive(lock), 60)
        assert not _lock_is_free(lock)
        time.sleep(0.5)
        run.send_signal(signal.SIGINT)
        out = run.communicate(timeout=60)[0]
    assert run.returncode == 99, out
    assert wait_for(lambda: _lock_is_free(lock), 15)
    assert _record(lock) is None  # released in order: the holder record is gone too


def test_a_stale_record_is_taken_over_even_with_pid_reuse(tmp_path: Path, demo: Path) -> None:
    inv = _inventory(tmp_path, demo, {"connection": "local"}, verify_stable_for=1)
    demo.mkdir()
    # A record whose keeper pid is alive but is another process (pid reuse): start time differs.
    stale = {"controller": "old-ctl", "user": "bob", "pid": 4242, "playbook": "old.yml", "started": 1.0,
             "keeper_pid": os.getpid(), "keeper_start": 1}
    (demo / "train.lock").write_text(json.dumps(stale))
    res = cli_subprocess("play", "restart_training.yml", "-i", str(inv))
    assert res.rc == 0, res.out
    assert "took over from bob@old-ctl (opsrunner pid 4242, playbook old.yml, started 1970-01-01 00:00:01 UTC), " \
           "which is no longer running" in res.out


def test_second_run_waits_up_to_lock_timeout(tmp_path: Path, demo: Path) -> None:
    inv = _inventory(tmp_path, demo, {"connection": "local"}, verify_stable_for=3)
    lock = demo / "train.lock"
    with _play("-i", str(inv)) as first:
        assert wait_for(lambda: _keeper_alive(lock), 60)
        second = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e", "{\"lock_timeout\": 120}",
                                "-e", "{\"verify_stable_for\": 1}")
        out = first.communicate(timeout=120)[0]
    assert first.returncode == 0, out
    assert second.rc == 0, second.out  # it waited for the first run instead of failing
    assert "killed 1:" in second.out
    assert _ready_lines(demo) == 2


def _lock_with_lease(lock: Path, lease: float) -> tuple[ConnectionFactory, Any]:
    """A local connection's real agent holding `lock` with a lease of `lease` seconds."""
    factory = ConnectionFactory()
    session = factory.get(ConnectionSpec(name="t", kind="local")).agent()
    reply = session.call("job_lock", {"path": str(lock), "lease": lease, "holder": {"pid": os.getpid()}})
    assert reply["locked"] is True, reply
    return factory, session


def test_an_agent_without_requests_lets_its_lock_go_at_the_lease(tmp_path: Path) -> None:
    """A half-open connection never delivers EOF: the lease ends the lock (and the agent) anyway."""
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 1)
    try:
        assert not _lock_is_free(lock)
        agent = session.pid
        assert _record(lock)["keeper_pid"] == agent  # type: ignore[index]
        start = time.monotonic()
        assert wait_for(lambda: _lock_is_free(lock), 15)  # its stdin still open, nothing sent
        assert time.monotonic() - start < 10
        assert wait_for(lambda: not Path(f"/proc/{agent}").exists() or
                        Path(f"/proc/{agent}/stat").read_text().split()[2] == "Z", 15)
        assert _record(lock) is None  # released in order: no record left behind
    finally:
        factory.close_all()


def test_heartbeats_keep_an_idle_lock_and_the_end_of_the_connection_frees_it(tmp_path: Path) -> None:
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 1)
    try:
        session.locks.add(str(lock))
        session.keep_leased(0.2)
        time.sleep(3)  # three leases long, no request but the beats
        assert not _lock_is_free(lock)
        assert session.call("beat", {}) == {}
    finally:
        factory.close_all()
    assert _lock_is_free(lock) and _record(lock) is None


def test_take_and_release_through_the_agent_and_a_second_connection_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / "job.lock"  # its folder is made
    holder = LockHolder.this_run("pb.yml", "run-1")
    first, second = ConnectionFactory(), ConnectionFactory()
    try:
        mine = first.get(ConnectionSpec(name="a", kind="local"))
        other = second.get(ConnectionSpec(name="b", kind="local"))
        assert take_job_lock(mine, str(lock), wait=0, holder=holder).msg == f"locked {lock} until the end of the run"
        assert holds_job_lock(mine, str(lock)) and take_job_lock(mine, str(lock), wait=0, holder=holder).msg == \
            "already held by this run"
        with pytest.raises(ModuleFailure, match="another run is restarting this job") as refused:
            take_job_lock(other, str(lock), wait=0.3, holder=holder)
        assert refused.value.data["holder"]["keeper_pid"] == mine.agent().pid
        with pytest.raises(ModuleFailure, match="another run is restarting this job"):
            take_job_lock(other, str(lock), wait=0, holder=holder, probe=True)  # check mode sees it too
        assert release_job_lock(mine, str(lock)).msg == f"released {lock}"
        assert _lock_is_free(lock) and not holds_job_lock(mine, str(lock)) and _record(lock) is None
        assert take_job_lock(other, str(lock), wait=0, holder=holder, probe=True).msg.endswith("is free (check mode: "
                                                                                                "not taken)")
        assert take_job_lock(other, str(lock), wait=0, holder=holder).data["stale"] is None
    finally:
        first.close_all()
        second.close_all()
    assert _lock_is_free(lock)


def test_a_lock_lost_at_the_lease_stops_the_host_instead_of_going_on(tmp_path: Path) -> None:
    """A controller not heard from for the lease (paused, say) finds its agent gone with the
    lock: every later request on that host refuses, as the host being unreachable, rather than
    starting a new agent and going on without the lock another run may have taken."""
    lock = tmp_path / "job.lock"
    factory, session = _lock_with_lease(lock, 1)
    try:
        session.locks.add(str(lock))  # as take_job_lock records it; no heartbeats, as in a pause
        assert wait_for(lambda: _lock_is_free(lock), 15)
        for _ in range(2):
            with pytest.raises(JobLocksLost, match=r"job lock\(s\) this run held here .* were let go"):
                session.call("beat", {})
        assert _lock_is_free(lock)  # nothing took it again
    finally:
        factory.close_all()


def test_a_play_whose_lock_went_with_its_agent_does_nothing_more_on_that_host(tmp_path: Path) -> None:
    """The agent holding the run's job lock dies during a controller-side pause: the next tasks do
    not run (the cache the play would clear is still there), the host is unreachable (exit 3), and
    the recap says why."""
    lock, cache = tmp_path / "job.lock", tmp_path / "cache"
    (cache / "kept").mkdir(parents=True)
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": {"connection": "local"}}}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "lock", "job_lock": {"path": str(lock)}},
        {"name": "wait", "pause": {"seconds": 4}},
        {"name": "clear", "clear_cache": {"paths": [str(cache)]}},
        {"name": "after", "command": "true"},
    ]}])
    with opsrunner_process("play", str(pb), "-i", str(inv), cwd=tmp_path) as proc:
        assert wait_for(lambda: (_record(lock) or {}).get("keeper_pid") is not None, 30)
        keeper = int(_record(lock)["keeper_pid"])  # type: ignore[index]
        os.kill(keeper, signal.SIGKILL)  # the agent this play started (its pid from the lock record)
        text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, text
    assert "were let go" in text and "nothing more is done on this host" in text
    assert (cache / "kept").is_dir()
    assert re.search(r"box\s*:.*unreachable=1", text), text
