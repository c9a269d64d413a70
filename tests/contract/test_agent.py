"""The long-lived agent's protocol, over local and ssh through both hostile wrappers.

Each test gives the agent its own HOME (an `env HOME=...` layer innermost in the wrapper
chain), so its cache directory - and so every agent process's command line - carries a
path unique to the test: that is how the test finds (and only ever touches) its own
agent processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opsrunner.connections.agent import AgentLost
from opsrunner.connections.artifact import agent_artifact, cache_name, inline_argv, package_sources
from opsrunner.connections.base import Connection, ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.connections.streams import Stream
from opsrunner.connections.wrappers import parse_chain
from opsrunner.remote.protocol import MAGIC, PACKAGE
from tests.conftest import FD_HOLDER, REAPER, pids_with, sleep_marker, wait_for, write_inventory, write_yaml
from tests.helpers import cli, opsrunner_process, read_events, started, task_ends
from tests.sshd import PrivateSSHD

CHAINS = {"local": [], "ssh+reaper+fd_holder": [REAPER, FD_HOLDER]}


class Rig:
    """A connection whose agent runs with a private HOME and a PATH holding a fake nvidia-smi."""

    def __init__(self, transport: str, sshd: PrivateSSHD | None, tmp: Path) -> None:
        self.home = tmp / "home"
        self.home.mkdir()
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.marker = sleep_marker()
        smi = self.bin / "nvidia-smi"  # a GPU query that hangs with a child: an op with a tree
        smi.write_text(f"#!/bin/sh\nsleep {self.marker}\n")
        smi.chmod(0o755)
        env_layer = f"env HOME={self.home} PATH={self.bin}:/usr/bin:/bin"
        chain = parse_chain([*CHAINS[transport], env_layer])
        if transport == "local":
            self.spec = ConnectionSpec(name="t", kind="local", wrapper=chain)
        else:
            assert sshd is not None
            self.spec = ConnectionSpec(name="t", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                       key_file=str(sshd.key_file), known_hosts_file=str(sshd.known_hosts),
                                       wrapper=chain)
        self.factory = ConnectionFactory()
        self.conn: Connection = self.factory.get(self.spec)

    def agent_pids(self) -> list[int]:
        """The agent and its workers: forks of it, with its command line."""
        return [p for p in pids_with(str(self.home)) if "opsrunner-agent" in _cmdline(p)]

    def all_pids(self) -> list[int]:
        """Everything of this rig still on the host: wrappers, agent, workers, the fake GPU query."""
        return pids_with(str(self.home)) + pids_with(self.marker)

    def close(self) -> None:
        self.factory.close_all()
        for pid in self.all_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture(params=sorted(CHAINS))
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    transport = str(request.param)
    server = request.getfixturevalue("sshd") if transport != "local" else None
    r = Rig(transport, server, tmp_path)
    yield r
    r.close()


def _read(rig: Rig) -> dict[str, Any]:
    return rig.conn.agent().call("read", {"paths": []})


class _CountingStream(Stream):
    """The real agent stream, counting the bytes the controller sends on it."""

    def __init__(self, inner: Stream) -> None:
        self.inner, self.sent = inner, 0

    def send(self, data: bytes) -> None:
        self.sent += len(data)
        self.inner.send(data)

    def recv(self, size: int, timeout: float | None) -> bytes:
        return self.inner.recv(size, timeout)

    def close(self, wait_exit: bool = False) -> bool:
        return self.inner.close(wait_exit)

    def alive(self) -> bool:
        return self.inner.alive()

    def exit_text(self) -> str:
        return self.inner.exit_text()


def test_a_cached_agent_is_started_without_sending_its_source(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    streams: list[_CountingStream] = []
    spawn = rig.conn._spawn

    def counting(argv: Any) -> Stream:
        streams.append(_CountingStream(spawn(argv)))
        return streams[-1]

    monkeypatch.setattr(rig.conn, "_spawn", counting)
    size = len(agent_artifact())
    assert _read(rig) == {"contents": {}}
    assert streams[0].sent > size  # first start on this HOME: the package, then the request
    rig.conn.agent().close()
    assert _read(rig) == {"contents": {}}  # a new agent, from the cache
    assert len(streams) == 2 and streams[1].sent < 1000, streams[1].sent


def test_one_agent_serves_every_request_and_greets_with_its_version(rig: Rig) -> None:
    notes: list[str] = []
    assert _read(rig) == {"contents": {}}
    agent = rig.conn.agent()
    first = agent.pid
    for _ in range(5):
        assert "contents" in agent.call("read", {"paths": []}, notes=notes)
    assert agent.pid == first and agent.starts == 1 and notes == []
    assert first in rig.agent_pids()
    # the agent's package was stored in the cache under its version and started from there
    assert _cached_sources(rig.home / ".cache" / "opsrunner") == package_sources()


def test_unknown_op_is_an_error_reply_and_the_agent_keeps_serving(rig: Rig) -> None:
    reply = rig.conn.agent().call("no_such_op", {})
    assert "unknown agent operation 'no_such_op'" in reply["error"]
    pid = rig.conn.agent().pid
    assert _read(rig) == {"contents": {}}
    assert rig.conn.agent().pid == pid


def test_output_before_the_greeting_is_skipped(tmp_path: Path) -> None:
    # A wrapper that prints to stdout before it execs (a motd, a chatty profile).
    noisy = "/bin/sh -c 'echo wrapper says hello; printf \"\\000\\001garbage\"; exec \"$@\"' sh"
    spec = ConnectionSpec(name="n", kind="local", wrapper=parse_chain([noisy, f"env HOME={tmp_path}"]))
    conn = ConnectionFactory().get(spec)
    try:
        assert conn.agent().call("read", {"paths": []}) == {"contents": {}}
    finally:
        conn.close()


def _cached_sources(cache: Path) -> dict[str, bytes]:
    """{file name: bytes} of the package in this version's cache directory."""
    return {f.name: f.read_bytes() for f in (cache / cache_name() / PACKAGE).glob("*.py")}


@contextlib.contextmanager
def _raw_agent(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An agent started by hand (inline, as where no cache can be written), past its greeting;
    ended by pid when the block ends."""
    with started(inline_argv(sys.executable), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, cwd=tmp_path) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdin.write(agent_artifact())
        proc.stdin.flush()
        greeting = proc.stdout.read(len(MAGIC) + 5)
        assert greeting.startswith(MAGIC)
        proc.stdout.read(struct.unpack(">I", greeting[-4:])[0])
        yield proc


@pytest.mark.parametrize("frame", [b"X\0\0\0\x01a", b"J" + struct.pack(">I", (64 << 20) + 1),
                                   b"J\0\0\0\x02[]", b"J\0\0\0\x03{x}"])
def test_malformed_or_oversized_frame_ends_the_agent_at_once(tmp_path: Path, frame: bytes) -> None:
    with _raw_agent(tmp_path) as proc:
        assert proc.stdin is not None
        proc.stdin.write(frame)
        proc.stdin.flush()  # stdin stays open: the agent must not wait for a 64 MiB body
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert b"opsrunner-agent:" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="PID namespaces (unshare --pid) need root")
def test_hosts_sharing_a_home_in_pid_namespaces_each_get_a_good_cached_agent(tmp_path: Path) -> None:
    # Containers (or machines) that share one HOME, each in a PID namespace of its own: the
    # same small pids everywhere, so a temporary file named after the shell's pid was one
    # name for all of them, and concurrent first starts wrote over each other's copy.
    home = tmp_path / "home"
    home.mkdir()
    chain = parse_chain(["unshare --pid --fork --mount-proc", f"env HOME={home}"])
    cache = home / ".cache" / "opsrunner"
    for _ in range(3):
        shutil.rmtree(cache, ignore_errors=True)
        factory = ConnectionFactory()
        try:
            replies, notes = _first_calls_together([factory.get(ConnectionSpec(name=f"h{i}", kind="local",
                                                                               wrapper=chain)) for i in range(8)])
            assert replies == [{"contents": {}}] * 8
            assert notes == [[]] * 8  # none found a broken cached copy
            assert _cached_sources(cache) == package_sources()
            assert [p.name for p in cache.iterdir()] == [cache_name()]  # no temp directory left
        finally:
            factory.close_all()


def _first_calls_together(conns: list[Connection]) -> tuple[list[Any], list[list[str]]]:
    """Each connection's first agent call (which starts its agent), all at once."""
    notes: list[list[str]] = [[] for _ in conns]
    replies: list[Any] = [None] * len(conns)

    def start(i: int) -> None:
        replies[i] = conns[i].agent().call("read", {"paths": []}, notes=notes[i])

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return replies, notes


def test_a_later_copy_of_the_cached_agent_keeps_its_bytecode_valid(tmp_path: Path) -> None:
    """Hosts that share a HOME each write the cached agent when it is missing, at different
    times. Every copy has the same mtime, so the bytecode compiled from one stays valid for
    the others: it is not compiled again (it was, on every host, when the copies' mtimes
    differed by a second)."""
    home = tmp_path / "home"
    spec = ConnectionSpec(name="n", kind="local",
                          wrapper=parse_chain([f"env -u PYTHONDONTWRITEBYTECODE HOME={home}"]))
    cache = home / ".cache" / "opsrunner"
    package = cache / cache_name() / PACKAGE

    def start_agent() -> None:
        factory = ConnectionFactory()
        try:
            assert factory.get(spec).agent().call("read", {"paths": []}) == {"contents": {}}
        finally:
            factory.close_all()

    start_agent()
    (compiled,) = (package / "__pycache__").glob("server.*.pyc")
    before = compiled.stat()
    kept = package.parent.with_name("kept")
    (package / "__pycache__").rename(kept)
    shutil.rmtree(cache / cache_name())  # as if this host had not written it: another copy comes later
    time.sleep(1.1)
    start_agent()  # unpacks a new copy; its bytecode is the kept one, put back beside it below
    shutil.rmtree(package / "__pycache__")
    kept.rename(package / "__pycache__")
    start_agent()
    after = compiled.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not compiled again
    assert _cached_sources(cache) == package_sources()
    assert (package / "server.py").stat().st_mtime == 946684800  # 2000-01-01 00:00 UTC, on every copy


def test_stale_cached_agent_is_never_used(rig: Rig) -> None:
    # A cached file under this version's name whose content is another version (an old or
    # partly written copy): the greeting gives it away; it is removed and replaced.
    cache = rig.home / ".cache" / "opsrunner"
    package = cache / cache_name() / PACKAGE
    package.mkdir(parents=True)
    for name, data in package_sources().items():
        (package / name).write_bytes(data + b"# an older build\n"
                                     if name == "agent.py" else data)
    notes: list[str] = []
    assert rig.conn.agent().call("read", {"paths": []}, notes=notes) == {"contents": {}}
    assert any("cached remote agent not used" in n and "version" in n for n in notes), notes
    assert not (cache / cache_name()).exists()
    # the next connection stores the right one again and uses it
    rig.close()
    fresh = ConnectionFactory().get(rig.spec)
    try:
        later: list[str] = []
        assert fresh.agent().call("read", {"paths": []}, notes=later) == {"contents": {}}
        assert later == []
        assert _cached_sources(cache) == package_sources()
    finally:
        fresh.close()


def test_timeout_inside_the_agent_kills_the_ops_tree_and_the_agent_lives_on(rig: Rig) -> None:
    agent = rig.conn.agent()
    _read(rig)
    pid = agent.pid
    start = time.monotonic()
    reply = agent.call("gpu_wait", {"wait": 600, "below_mb": 1}, timeout=2)
    elapsed = time.monotonic() - start
    assert reply.get("timed_out") is True, reply
    assert 1.5 < elapsed < 15
    # the fake GPU query's `sleep` was a grandchild of the op: gone with the op's tree
    assert wait_for(lambda: not pids_with(rig.marker), 10)
    assert _read(rig) == {"contents": {}}
    assert agent.pid == pid and agent.starts == 1


def _worker_of(rig: Rig, script: str = "", stdin: bytes | None = None) -> int:
    """The pid of the worker that ran `sh -c script` (the command's parent)."""
    res = rig.conn.agent().exec(["/bin/sh", "-c", script + "echo $PPID"],
                                stdin=None if stdin is None else io.BytesIO(stdin), cwd=None, timeout=30)
    assert res.rc == 0, res
    return int(res.stdout.split()[-1])


def test_a_worker_serves_again_only_when_left_as_it_started(rig: Rig) -> None:
    agent = rig.conn.agent()
    plain = _worker_of(rig)
    assert plain != agent.pid
    # Requests without a payload that leave nothing behind: one worker serves them all.
    assert [_worker_of(rig) for _ in range(3)] == [plain] * 3
    assert _read(rig) == {"contents": {}} and _worker_of(rig) == plain
    # A payload needs an unused stdin pipe: another worker, which exits after it; the
    # plain one is still there for the next request without one.
    with_payload = _worker_of(rig, "cat; ", stdin=b"payload ")
    assert with_payload not in (plain, agent.pid)
    assert _worker_of(rig) == plain
    assert wait_for(lambda: not Path(f"/proc/{with_payload}").exists(), 10)
    # A request that leaves a process behind (reparented to the worker, its subreaper):
    # that worker exits after replying, and the next request gets a fresh one.
    assert _worker_of(rig, f"sleep {rig.marker} >/dev/null 2>&1 & ") == plain
    after = _worker_of(rig)
    assert after != plain
    assert wait_for(lambda: not Path(f"/proc/{plain}").exists(), 10)
    assert agent.starts == 1


def test_a_payload_ends_at_its_end_whatever_workers_came_and_went_before(rig: Rig) -> None:
    # Workers are forks of the agent: one forked while another waits must not hold that one's
    # pipes, or a command reading its stdin (a shell task's script) never sees it end.
    _worker_of(rig)  # the plain worker, now without a stdin pipe
    _worker_of(rig, "cat; ", stdin=b"x\n")  # a fresh one served it; the next fresh one waits
    _worker_of(rig, f"sleep {rig.marker} >/dev/null 2>&1 & ")  # the plain one is replaced
    _worker_of(rig)  # the new plain worker, again without a stdin pipe
    start = time.monotonic()
    res = rig.conn.agent().exec(["/bin/sh", "-c", "cat"], stdin=io.BytesIO(b"to the end\n"), cwd=None, timeout=10)
    assert (res.rc, res.stdout, res.timed_out) == (0, "to the end\n", False)
    assert time.monotonic() - start < 5


def test_once_the_connection_is_closed_the_agent_and_its_workers_are_gone(rig: Rig) -> None:
    _worker_of(rig)  # the worker kept for requests without a payload
    _worker_of(rig, "cat; ", stdin=b"x\n")  # and, from now on, a fresh one for payloads
    assert len(rig.agent_pids()) >= 3  # the agent, two workers (and the chain's processes naming it)
    rig.factory.close_all()
    assert rig.agent_pids() == []  # at once: the close waits for the agent, the agent for its workers


def test_a_request_that_changes_the_workers_environment_gets_it_replaced(tmp_path: Path) -> None:
    # clear_cache sets USER where it is missing (its paths may name $USER): a command run
    # after it must still see the environment the agent started with.
    spec = ConnectionSpec(name="n", kind="local", wrapper=parse_chain([f"env -u USER HOME={tmp_path}"]))
    factory = ConnectionFactory()
    conn = factory.get(spec)
    try:
        agent = conn.agent()

        def user_and_worker() -> list[str]:
            res = agent.exec(["/bin/sh", "-c", 'echo "${USER-unset}" $PPID'], stdin=None, cwd=None, timeout=30)
            return res.stdout.split()

        user, worker = user_and_worker()
        assert user == "unset"
        assert "removed" in agent.call("clear", {"paths": []})
        user, after = user_and_worker()
        assert user == "unset" and after != worker
    finally:
        factory.close_all()


def _in_flight(rig: Rig) -> tuple[threading.Thread, dict[str, Any]]:
    """A long op (a GPU wait whose query hangs) running in a thread; its outcome lands in box."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["reply"] = rig.conn.agent().call("gpu_wait", {"wait": 600, "below_mb": 1}, timeout=300)
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert wait_for(lambda: bool(pids_with(rig.marker)), 20), "the op did not start"
    return thread, box


def test_agent_crash_mid_request_fails_that_task_then_restarts_once_and_reports(rig: Rig) -> None:
    _read(rig)
    agent = rig.conn.agent()
    old = agent.pid
    assert old is not None
    thread, box = _in_flight(rig)
    os.kill(old, signal.SIGKILL)
    thread.join(30)
    assert isinstance(box.get("error"), AgentLost), box
    assert "during 'gpu_wait'" in str(box["error"])
    # the in-flight op's processes went with the agent
    assert wait_for(lambda: not pids_with(rig.marker), 10)
    notes: list[str] = []
    assert agent.call("read", {"paths": []}, notes=notes) == {"contents": {}}
    assert agent.pid != old and agent.starts == 2
    assert len(notes) == 1 and "remote agent restarted" in notes[0], notes


def test_agent_killed_between_tasks_is_restarted_for_the_next_one(rig: Rig) -> None:
    # What a container exec session does when it is torn down (the session reaper's
    # behaviour): every process of the agent's session is SIGKILLed while the agent is idle.
    _read(rig)
    agent = rig.conn.agent()
    old = agent.pid
    assert old is not None
    sid = os.getsid(old)
    for pid in rig.agent_pids() + rig.all_pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == sid:
                os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: old not in rig.agent_pids(), 10)
    time.sleep(0.5)
    notes: list[str] = []
    assert agent.call("read", {"paths": []}, notes=notes) == {"contents": {}}
    assert agent.pid != old
    assert len(notes) == 1 and "remote agent restarted" in notes[0], notes


def test_closing_the_connection_stops_in_flight_work_and_leaves_nothing(rig: Rig) -> None:
    _read(rig)
    thread, _box = _in_flight(rig)
    assert rig.agent_pids()
    rig.conn.close()  # what Ctrl-C and the end of a run do
    thread.join(30)
    assert not thread.is_alive()
    assert wait_for(lambda: not rig.all_pids(), 15), [_cmdline(p) for p in rig.all_pids()]


# -- through the CLI --------------------------------------------------------------------------
def _play(rig: Rig, transport: str, sshd: PrivateSSHD | None, body: str, *args: str,
          **host_vars: str) -> tuple[int, str, list[Any]]:
    """Run a play on one host with the rig's wrapper chain (and so its private HOME and PATH)."""
    layers = [*CHAINS[transport], f"env HOME={rig.home} PATH={rig.bin}:/usr/bin:/bin"]
    host = {"connection": "local", "wrapper": layers} if transport == "local" else \
        dict(sshd.host_vars(wrapper=layers)) if sshd else {}
    host.update(host_vars)
    work = rig.home.parent
    inv = write_inventory(work / "inv.yml", {"h": host})
    pb = write_yaml(work / "pb.yml", body)
    events = work / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *args, cwd=work)
    return res.rc, res.out + res.err, read_events(events)


@pytest.mark.parametrize("transport", sorted(CHAINS))
def test_play_reports_a_killed_agent_and_the_next_task_restarts_it(transport: str, request: pytest.FixtureRequest,
                                                                     tmp_path: Path) -> None:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    rig = Rig(transport, server, tmp_path)
    try:
        # The middle task kills this play's agent between two agent tasks (found by its private
        # HOME in its command line; anchored, so the killing shell does not match itself). The
        # shell task runs as a bare exec here, outside the agent it kills.
        rc, out, ev = _play(rig, transport, server, f"""
- hosts: all
  tasks:
    - {{name: first, kill_old: {{pattern: "^nothing-{rig.marker}$"}}}}
    - name: crash the agent
      shell: pkill -KILL -f '^[^ ]*python[^ ]* -S -c . opsrunner-agent.*{rig.home}'
    - {{name: after, kill_old: {{pattern: "^nothing-{rig.marker}$"}}}}
""", command_exec="bare")
        assert rc == 0, out
        (after,) = task_ends(ev, "after")
        assert after["status"] == "ok"
        notes = after["data"]["notes"]
        assert len(notes) == 1 and "remote agent restarted" in notes[0], notes
        assert "[note: remote agent restarted" in out
        (first,) = task_ends(ev, "first")
        assert "notes" not in first["data"]
    finally:
        rig.close()


@pytest.mark.parametrize("transport", sorted(CHAINS))
def test_a_command_that_kills_its_own_agent_fails_and_the_next_task_restarts_it(
        transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    rig = Rig(transport, server, tmp_path)
    try:
        # A shell task run by the agent that kills the agent (as `pkill -f python3` would): the
        # task fails naming the lost agent, never passes; the next command gets a new agent.
        rc, out, ev = _play(rig, transport, server, f"""
- hosts: all
  tasks:
    - name: crash the agent
      shell: pkill -KILL -f '^[^ ]*python[^ ]* -S -c . opsrunner-agent.*{rig.home}'; sleep 5
      ignore_errors: true
    - {{name: after, command: "echo {rig.marker}"}}
""", command_exec="agent")
        assert rc == 0, out
        (crash,) = task_ends(ev, "crash the agent")
        assert crash["status"] == "failed"
        # killed by SIGKILL: reported as such, or as 137 where a wrapper's shell stands between
        assert "remote agent (pid " in crash["msg"], crash["msg"]
        assert "killed by signal 9" in crash["msg"] or "exit status 137" in crash["msg"], crash["msg"]
        (after,) = task_ends(ev, "after")
        assert after["status"] == "changed" and after["stdout_tail"] == rig.marker
        assert "remote agent restarted" in after["data"]["notes"][0], after["data"]
        assert wait_for(lambda: not rig.all_pids(), 15), [_cmdline(p) for p in rig.all_pids()]
    finally:
        rig.close()


def test_interrupt_stops_in_flight_agent_work_over_the_hostile_chain(sshd: PrivateSSHD, tmp_path: Path) -> None:
    rig = Rig("ssh+reaper+fd_holder", sshd, tmp_path)
    try:
        layers = [REAPER, FD_HOLDER, f"env HOME={rig.home} PATH={rig.bin}:/usr/bin:/bin"]
        inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(wrapper=layers)})
        pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  tasks:
    - kill_old: {{pattern: "^nothing-{rig.marker}$", wait_gpu_free: 600, gpu_free_below_mb: 1}}
""")
        # Ended by pid when the block ends, pass or fail (SIGINT may be ignored: a background shell).
        with opsrunner_process("play", str(pb), "-i", str(inv)) as proc:
            assert wait_for(lambda: bool(pids_with(rig.marker)), 30)  # the op's GPU query is running
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 99, out
        assert wait_for(lambda: not rig.all_pids(), 15), [_cmdline(p) for p in rig.all_pids()]
    finally:
        rig.close()


def test_vvv_prints_each_command_once_and_no_agent_or_watchdog_source(sshd: PrivateSSHD, tmp_path: Path) -> None:
    rig = Rig("ssh+reaper+fd_holder", sshd, tmp_path)
    try:
        rc, out, _ev = _play(rig, "ssh+reaper+fd_holder", sshd, f"""
- hosts: all
  tasks:
    - {{name: k, kill_old: {{pattern: "^nothing-{rig.marker}$"}}}}
    - {{name: v, verify: {{pattern: "^nothing-{rig.marker}$", processes: 0}}}}
    - {{name: s, shell: "echo {rig.marker}", timeout: 30}}
""", "-vvv")
        assert rc == 0, out
        sent = [line for line in out.splitlines() if "SENT:" in line]
        assert sum("agent kill " in line for line in sent) == 1
        assert sum("agent verify " in line for line in sent) == 1
        # a shell task's script travels on stdin: -vvv shows it once, under its command
        assert sum(f"| echo {rig.marker}" in line for line in out.splitlines()) == 1
        assert sum("<opsrunner-agent start: cached package>" in line for line in sent) == 1  # started once
        assert "<opsrunner-watchdog>" in out
        for source_line in ("def op_kill", "PR_SET_CHILD_SUBREAPER", "def _worker_main"):
            assert source_line not in out
    finally:
        rig.close()
