"""The ssh workers' seed (connections/workerseed.py): `opsrunner play` starts it as it starts,
and it forks the run's workers once the hosts are known; a run that wants none ends it unused;
the workers' ends are told as before; where the seed is gone, the workers are spawned."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import pids_with, wait_for, write_inventory, write_yaml
from tests.e2e.test_ssh_workers import SEED, WORKER, _alive, _children, _seeds_of, _workers_of
from tests.helpers import cli_subprocess, opsrunner_process, read_events, task_ends
from tests.sshd import PrivateSSHD

MARK_VAR = "OPSRUNNER_TEST_SEED_MARK"


def _with_mark(mark: str) -> list[int]:
    """Live processes whose environment carries this test's own marker (the controller's
    environment is the seed's and its workers')."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if f"{MARK_VAR}={mark}".encode() in Path(f"/proc/{name}/environ").read_bytes().split(b"\0") \
                    and _alive(int(name)):
                found.append(int(name))
        except OSError:
            continue
    return found


def _inheritable_pipes(pid: int) -> list[int]:
    """The process's pipe fds above stderr that a program it starts would inherit."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            is_pipe = os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:")
            flags = next(line for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
                         if line.startswith("flags:"))
        except (OSError, StopIteration):
            continue
        if int(fd) > 2 and is_pipe and not int(flags.split()[1], 8) & os.O_CLOEXEC:
            found.append(int(fd))
    return found


def test_play_forks_its_workers_from_the_seed_and_leaves_nothing(tmp_path: Path, sshd: PrivateSSHD,
                                                                 cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(3)})
    stop_file = tmp_path / "go"
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "wait", "shell": f"while [ ! -e {stop_file} ]; do sleep 0.05; done; "
                                  f"sleep {cleanup_marker} & kill $!"},
        {"name": "after", "command": "echo done"}]}])
    events = tmp_path / "ev.jsonl"
    mark = uuid.uuid4().hex
    with opsrunner_process("play", str(pb), "-i", str(inv), "--ssh-workers", "2", "--json-events", str(events),
                           env={MARK_VAR: mark}) as proc:
        assert wait_for(lambda: len(_workers_of(proc.pid)) == 2, 30), _children(proc.pid)
        (seed,) = _seeds_of(proc.pid)
        workers = _workers_of(proc.pid)
        assert not [c for c, cmdline in _children(proc.pid) if WORKER in cmdline]  # none spawned on their own
        assert sorted(c for c, _ in _children(seed)) == sorted(workers)
        # The workers' pipe ends it received are close-on-exec: a program it starts holds none open.
        assert _inheritable_pipes(proc.pid) == [], _inheritable_pipes(proc.pid)
        stop_file.touch()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    ends = task_ends(read_events(events), "after")
    assert sorted(e["host"] for e in ends if e["status"] == "changed") == ["h0", "h1", "h2"], ends
    assert not _alive(seed) and not any(_alive(w) for w in workers)
    assert not _with_mark(mark)


def test_a_play_refused_before_its_hosts_ends_its_unused_seed(tmp_path: Path) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"h": {"connection": "local"}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "bad", "command": "echo {{ never_defined_anywhere }}"}]}])
    mark = uuid.uuid4().hex
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--ssh-workers", "2", env={MARK_VAR: mark})
    assert res.rc == 4, res.out + res.err
    assert "never_defined_anywhere" in res.err
    assert wait_for(lambda: not _with_mark(mark), 5), _with_mark(mark)


def test_a_forked_worker_that_is_killed_is_told_by_its_signal(tmp_path: Path, sshd: PrivateSSHD,
                                                              cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(2)})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "long", "shell": f"sleep {cleanup_marker}"}]}])
    events = tmp_path / "ev.jsonl"
    with opsrunner_process("play", str(pb), "-i", str(inv), "--ssh-workers", "1", "--json-events", str(events),
                           "--no-color") as proc:
        assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 30), "the remote commands never started"
        (seed,) = _seeds_of(proc.pid)
        (worker,) = _workers_of(proc.pid)
        os.kill(worker, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
    ends = {e["host"]: e for e in task_ends(read_events(events), "long")}
    for host in ("h0", "h1"):
        assert ends[host]["status"] == "unreachable", ends
        assert f"the ssh worker process (pid {worker}) that held this host's connection ended " \
               "(killed by signal 9)" in ends[host]["msg"], ends[host]
    assert proc.returncode == 3, out
    assert not _alive(seed)
    assert wait_for(lambda: not pids_with(cleanup_marker), 15), pids_with(cleanup_marker)


def test_workers_are_spawned_where_the_seed_is_gone(tmp_path: Path, sshd: PrivateSSHD) -> None:
    """A library run in a process whose seed was killed before the run took it: the run spawns
    its workers as without a seed, and gives its results."""
    from opsrunner import api
    from opsrunner.connections import workerseed

    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(2)})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"name": "hello", "command": "echo hi"}]}])
    seed = workerseed.prestart()
    assert seed is not None
    seed.proc.kill()
    seed.proc.wait()
    events = tmp_path / "ev.jsonl"
    with events.open("w") as stream:
        from opsrunner.reporting import JsonEventsReporter

        summary = api.run(api.PlayRequest(playbook=str(pb), inventory=[str(inv)], ssh_workers=2, history=False),
                          [JsonEventsReporter(stream)])
    assert summary.exit_code == 0
    assert sorted(e["host"] for e in task_ends(read_events(events), "hello") if e["status"] == "changed") == \
        ["h0", "h1"]
    assert workerseed.take() is None  # the run took the dead seed and let it go
    assert wait_for(lambda: not [c for c, cmdline in _children(os.getpid()) if WORKER in cmdline or SEED in cmdline],
                    5), _children(os.getpid())


def test_a_seed_that_does_not_answer_does_not_hold_the_run(tmp_path: Path, sshd: PrivateSSHD,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed stuck before it forks (a hung import; here a stopped process): after FORK_WAIT_S
    the run spawns its workers and goes on, and the seed is killed, not left stopped."""
    from opsrunner import api
    from opsrunner.connections import workerseed

    monkeypatch.setattr(workerseed, "FORK_WAIT_S", 1.0)
    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(2)})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"name": "hello", "command": "echo hi"}]}])
    seed = workerseed.prestart()
    assert seed is not None
    os.kill(seed.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    summary = api.run(api.PlayRequest(playbook=str(pb), inventory=[str(inv)], ssh_workers=2, history=False))
    assert summary.exit_code == 0
    assert time.monotonic() - started < 20
    assert seed.proc.poll() is not None  # killed, and reaped
    assert wait_for(lambda: not [c for c, cmdline in _children(os.getpid()) if WORKER in cmdline or SEED in cmdline],
                    5), _children(os.getpid())
