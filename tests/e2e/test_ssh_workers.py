"""ssh connections held by worker processes (--ssh-workers, connections/workerpool.py): a run
gives the same results with them as without, a Ctrl-C to the whole terminal's process group
still stops the remote work and is recorded, and workers never outlive their controller."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.conftest import FD_HOLDER, REAPER, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process, read_events, task_ends
from tests.sshd import PrivateSSHD

WORKER = "opsrunner.connections.workerproc"
SEED = "opsrunner.connections.workerseed"


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of each child of `pid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append((int(name), cmdline))
    return found


def _seeds_of(pid: int) -> list[int]:
    return [child for child, cmdline in _children(pid) if SEED in cmdline]


def _workers_of(pid: int) -> list[int]:
    """The ssh workers of controller `pid`: spawned by it (a library run), or forked by the seed
    it started (`opsrunner play`, workerseed.py)."""
    spawned = [child for child, cmdline in _children(pid) if WORKER in cmdline]
    return spawned + [worker for seed in _seeds_of(pid) for worker, _ in _children(seed)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Outcome = tuple[str, str, str, str]  # host, task, status, message


def _outcomes(tmp_path: Path, sshd: PrivateSSHD, workers: int, marker: str) -> tuple[int, list[Outcome]]:
    run = tmp_path / f"w{workers}"
    run.mkdir()
    hosts = {f"h{i}": {**sshd.host_vars(connect_timeout=5), "work": str(run / f"h{i}")} for i in range(4)}
    hosts["gone"] = {**sshd.host_vars(connect_timeout=3), "port": _closed_port(), "work": str(run / "gone")}
    # Behind the hostile wrappers: bare execs under the watchdog, and the launch in an exec session of its own.
    hosts["wrapped"] = {**sshd.host_vars(connect_timeout=5, wrapper=[REAPER, FD_HOLDER]), "work": str(run / "wrapped")}
    inv = write_inventory(run / "inv.yml", hosts)
    payload = run / "payload.bin"
    payload.write_bytes(bytes(range(256)) * 1200)  # more than one chunk of a command's stdin
    pb = write_yaml(run / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "dir", "file": {"path": "{{ work }}", "state": "directory"}},
        {"name": "copy", "copy": {"src": str(payload), "dest": "{{ work }}/payload.bin"}},
        {"name": "sum", "shell": "sha256sum {{ work }}/payload.bin | cut -d' ' -f1", "register": "sum"},
        {"name": "env", "shell": "echo \"$GREETING from $(hostname -s >/dev/null && echo {{ inventory_hostname }})\"",
         "environment": {"GREETING": "hello"}, "register": "env"},
        {"name": "launch", "launch_detached": {"argv": ["sleep", marker], "log": "{{ work }}/job.log",
                                               "pidfile": "{{ work }}/job.pid"}},
        {"name": "verify", "verify": {"pidfile": "{{ work }}/job.pid", "processes": 1}},
        {"name": "hang", "shell": f"sleep {marker}9", "timeout": 1, "ignore_errors": True},
        {"name": "stop", "kill_old": {"pidfile": "{{ work }}/job.pid", "grace": 5}},
        {"name": "show", "debug": {"msg": "{{ sum.stdout }} {{ env.stdout }}"}},
    ]}])
    events = run / "events.jsonl"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--ssh-workers", str(workers), "--json-events", str(events),
                         timeout=180)
    assert "Traceback" not in res.out + res.err, res.out + res.err
    ends = task_ends(read_events(events))
    # What a host did, less what differs from run to run (pids, durations, paths of this run).
    return res.rc, sorted((e["host"], e["task"], e["status"],
                           _same_each_run(str(e.get("msg", "")).replace(str(run), "RUN"))) for e in ends)


def _same_each_run(msg: str) -> str:
    """A result's message less pids and durations (`up 0.4s`, `after 1.2s`), which no two runs share."""
    return re.sub(r"\b\d{3,}\b", "N", re.sub(r"\b\d+\.\d+s\b", "Ts", msg))


def test_a_run_gives_the_same_results_with_workers(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    rc0, without = _outcomes(tmp_path, sshd, 0, cleanup_marker)
    rc2, with_workers = _outcomes(tmp_path, sshd, 2, cleanup_marker)
    assert (rc2, with_workers) == (rc0, without)
    by = {(h, t): (s, m) for h, t, s, m in with_workers}
    assert by[("gone", "dir")][0] == "unreachable" and "connection refused" in by[("gone", "dir")][1]
    assert by[("h0", "hang")][0] == "timed_out" and "timed out" in by[("h0", "hang")][1]
    assert by[("h2", "verify")][0] == "ok" and by[("h3", "stop")][0] == "changed"
    assert "hello from h1" in by[("h1", "show")][1]
    assert [by[("wrapped", t)][0] for t in ("copy", "launch", "verify", "hang", "stop")] == [
        "changed", "changed", "ok", "timed_out", "changed"]
    assert not pids_with(cleanup_marker)  # the job stopped, the hung command stopped at its timeout


def test_ctrl_c_to_the_process_group_stops_remote_work_with_workers(tmp_path: Path, sshd: PrivateSSHD,
                                                                    cleanup_marker: str) -> None:
    """A terminal's Ctrl-C reaches every process of the group: the workers keep the
    connections for the controller, which stops the remote commands and records the run."""
    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(3)})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "long", "shell": f"sleep {cleanup_marker} & sleep {cleanup_marker}"}]}])
    events = tmp_path / "ev.jsonl"
    with opsrunner_process("play", str(pb), "-i", str(inv), "--ssh-workers", "2", "--json-events", str(events),
                           "--no-color", start_new_session=True) as proc:
        assert wait_for(lambda: len(pids_with(cleanup_marker)) == 6, 30), "the remote commands never started"
        assert len(_workers_of(proc.pid)) == 2
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        assert wait_for(lambda: not pids_with(cleanup_marker), 10, 0.02), pids_with(cleanup_marker)
        stopped = time.monotonic() - start
        out, _ = proc.communicate(timeout=30)
    assert stopped < 2.0, f"the remote commands lived {stopped:.2f}s after Ctrl-C"
    assert proc.returncode == 99, out
    assert "interrupted: run stopped by the user" in out and "Traceback" not in out
    recap = read_events(events)[-1]
    assert recap["event"] == "recap" and recap["interrupted"] is True


def test_workers_end_with_a_controller_that_is_killed(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars()})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "long", "shell": f"sleep {cleanup_marker}"}]}])
    with opsrunner_process("play", str(pb), "-i", str(inv), "--ssh-workers", "1") as proc:
        assert wait_for(lambda: len(pids_with(cleanup_marker)) == 1, 30), "the remote command never started"
        workers = _workers_of(proc.pid)
        assert len(workers) == 1
        proc.kill()  # SIGKILL: nothing of the controller runs again
        proc.wait()
        assert wait_for(lambda: not _alive(workers[0]), 10), "the worker outlived its controller"
        # Its connection went with it: the agent and the command it ran end as after a lost session.
        assert wait_for(lambda: not pids_with(cleanup_marker), 15), pids_with(cleanup_marker)


@pytest.mark.parametrize("args,env,key", [
    (["--ssh-workers", "-1"], {}, "--ssh-workers"),
    ([], {"OPSRUNNER_SSH_WORKERS": "many"}, "OPSRUNNER_SSH_WORKERS"),
])
def test_a_bad_worker_count_is_bad_input(tmp_path: Path, args: list[str], env: dict[str, str], key: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"h": {"connection": "local"}})
    flag = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"command": f"touch {flag}"}]}])
    res = cli_subprocess("play", str(pb), "-i", str(inv), *args, env=env)
    assert res.rc == 4 and f"(at {key})" in res.out + res.err
    assert not flag.exists()


def test_a_commands_stdin_streamed_from_a_file_reaches_it_whole_through_a_worker(tmp_path: Path,
                                                                                  sshd: PrivateSSHD) -> None:
    """put() and run(stdin=<file>) send their stdin in chunks after the request (workerpool.py):
    the worker keeps the feed until the command has read it all."""
    import hashlib
    import io

    from opsrunner.connections.base import ConnectionSpec
    from opsrunner.connections.startslots import StartSlots
    from opsrunner.connections.workerpool import WorkerPool

    data = bytes(range(256)) * 3000  # 768 KB: twelve chunks
    pool = WorkerPool(1)
    spec = ConnectionSpec(name="h", host="127.0.0.1", port=sshd.port, user=sshd.user, key_file=str(sshd.key_file),
                          known_hosts_file=str(sshd.known_hosts))
    conn = pool.connection(spec, None, StartSlots())
    try:
        assert conn.put(io.BytesIO(data), str(tmp_path / "put.bin")).rc == 0
        summed = conn.run(["sha256sum"], stdin=io.BytesIO(data))
        assert summed.rc == 0 and summed.stdout.split()[0] == hashlib.sha256(data).hexdigest()
        again = conn.run(["cat", str(tmp_path / "put.bin")])  # the worker still serves its hosts
    finally:
        conn.close()
        pool.close()
    assert (tmp_path / "put.bin").read_bytes() == data and again.stdout_bytes == data
    assert all(w.proc.returncode == 0 for w in pool.workers)


def test_a_worker_that_dies_leaves_its_hosts_unreachable_and_the_run_ends(tmp_path: Path, sshd: PrivateSSHD,
                                                                           cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {f"h{i}": sshd.host_vars() for i in range(2)})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "long", "shell": f"sleep {cleanup_marker}"}, {"name": "after", "command": "true"}]}])
    events = tmp_path / "ev.jsonl"
    with opsrunner_process("play", str(pb), "-i", str(inv), "--ssh-workers", "1", "--json-events", str(events),
                           "--no-color") as proc:
        assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 30), "the remote commands never started"
        (worker,) = _workers_of(proc.pid)
        os.kill(worker, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out
    ends = {(e["host"], e["task"]): e for e in task_ends(read_events(events))}
    for host in ("h0", "h1"):
        assert ends[(host, "long")]["status"] == "unreachable", ends
        assert ("h0", "after") not in ends and ("h1", "after") not in ends
    assert proc.returncode != 0
    assert wait_for(lambda: not pids_with(cleanup_marker), 15), pids_with(cleanup_marker)


def test_workers_end_with_a_run_refused_before_its_first_task(tmp_path: Path, sshd: PrivateSSHD) -> None:
    """A library caller's run that preflight refuses (exit 4) leaves no worker behind."""
    from opsrunner import api
    from opsrunner.errors import ValidationError

    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars()})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "bad", "command": "echo {{ never_defined_anywhere }}"}]}])
    with pytest.raises(ValidationError):
        api.run(api.PlayRequest(playbook=str(pb), inventory=[str(inv)], ssh_workers=2, history=False))
    assert wait_for(lambda: not _workers_of(os.getpid()), 5), _workers_of(os.getpid())
