"""The controller side of the long-lived agent: one per host connection, started on the
first module call that needs it and kept for the whole run.

The agent (the opsrunner/remote package, shipped as one zip: artifact.py) runs behind the
whole wrapper chain and speaks remote/protocol.py over its stdin/stdout. It greets with its
protocol and version (the digest of its package's sources), so a stale cached agent is never
used. Each request runs on the target in a forked worker that the agent
kills, with its whole tree, at the request's deadline or when the connection closes.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from opsrunner import idle
from opsrunner.connections.agenthost import AgentHost
from opsrunner.connections.artifact import UNCACHE, agent_artifact, agent_version, cache_name, inline_argv, start_argv
from opsrunner.connections.become import REFUSED
from opsrunner.connections.leases import JobLocksLost, LeaseWatch
from opsrunner.connections.ops import EXEC, AgentOp, ArgsT, ReplyT
from opsrunner.connections.streams import Stream
from opsrunner.errors import ConnectionFailed, ModuleFailure
from opsrunner.remote.protocol import (
    ACK,
    CHUNK,
    DATA,
    END,
    HEAD_SIZE,
    JSON,
    MAGIC,
    MAX_JSON,
    NEED_SOURCE,
    PROTOCOL,
    frame,
    frame_size,
)
from opsrunner.results import CommandResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_host import ExecArgs, ExecReply


#: How much output a wrapper may print before the agent's greeting. How long a start may
#: take is the host's connect_timeout (default 10 s, as Ansible's connection timeout): a
#: connection or wrapper chain that has not started the agent by then makes the host
#: unreachable, whatever the task's own deadline.
MAX_PREAMBLE = 64 << 10
#: Extra seconds past a request's deadline before the controller gives up on the agent
#: itself (the agent normally answers "timed out" first).
BACKUP_GRACE_S = 5.0
#: How long a heartbeat's reply may take (the agent answers it at once) before the agent counts as lost.
BEAT_REPLY_S = 30.0
#: An exec request's deadline in the agent is this much past the command's own, so that the
#: worker, which returns the output so far, normally acts first.
EXEC_GRACE_S = 2.0


class AgentLost(ModuleFailure):
    """The agent process ended (crashed, killed, connection lost) while in use."""


class AgentStartFailed(ModuleFailure):
    """The agent could not be started on the host (no Python there, a wrapper that fails...)."""


class AgentSession(LeaseWatch):
    """The agent of one connection: started lazily, restarted once after it is lost."""

    def __init__(self, connection: AgentHost) -> None:
        super().__init__()
        self.connection = connection
        self.pid: int | None = None
        self.starts = 0
        self._stream: Stream | None = None
        self._buf = b""
        self._lost: str | None = None
        self._cacheable = True
        self._lock = threading.Lock()
        #: Seconds the last start waited for its turn (connections/startslots.py).
        self.turn_wait = 0.0

    # -- requests ---------------------------------------------------------------------------
    def call(self, op: str, args: dict[str, Any], *, timeout: float | None = None,
             payload: IO[bytes] | None = None, notes: list[str] | None = None,
             shown: str | None = None) -> dict[str, Any]:
        """Send one request and return the agent's reply ({"timed_out": True, ...} at the deadline).

        The agent acknowledges a request as soon as it has read it. An agent that is found
        gone before that (it died between tasks) never started the request: a new agent is
        started and the request sent once more, with a note. Lost after that, the request
        fails (it may have run in part) and the next one starts a new agent."""
        try:
            reply = self._call(op, args, timeout, payload, notes, shown)
        except Exception:
            idle.raise_kept()  # an error of the work done while the request was in flight goes first
            raise
        idle.raise_kept()  # (idle.py): raised once the request is answered
        return reply

    def _call(self, op: str, args: dict[str, Any], timeout: float | None, payload: IO[bytes] | None,
              notes: list[str] | None, shown: str | None) -> dict[str, Any]:
        with self._lock:
            self._begin()
            if self.connection.log:  # `shown`: what -vvv prints instead of the request
                self.connection.log(self.connection.spec.name, shown or f"agent {op} {json.dumps(_loggable(args))}")
            request = json.dumps({"op": op, "args": args, "timeout": timeout,
                                  "payload": payload is not None}).encode()
            rewind = payload.tell() if payload is not None and payload.seekable() else None
            backup = None if timeout is None else time.monotonic() + timeout + BACKUP_GRACE_S
            try:  # a start counts toward the request's time: a hung wrapper times out the task
                stream = self._ensure_started(notes, None if timeout is None else time.monotonic() + timeout)
            except TimeoutError:
                return {"timed_out": True, "error": f"the remote agent did not start within {timeout:g}s "
                                                    "(the host or a wrapper hangs); it was stopped"}
            if backup is not None:  # its wait for a start slot is this controller's, not the request's
                backup += self.turn_wait
            try:
                stream, backup = self._exchange(stream, request, payload, rewind, backup, notes)
                reply = self._read_frame(stream, backup, JSON)
            except TimeoutError:
                self._drop("did not answer within the task timeout; it was stopped")
                return {"timed_out": True, "error": f"the agent did not answer within {timeout:g}s"}
            except (OSError, EOFError, ValueError) as exc:
                if self.connection.session_lost():
                    self._drop("lost with the connection")
                    because = self.connection.lost_because()
                    raise ConnectionFailed(f"ssh session lost while the agent ran '{op}'"
                                           + (f": {because}" if because else "")) from None
                reason = self._drop(f"ended ({stream.exit_text() or exc})")
                raise AgentLost(f"remote agent (pid {self.pid}) {reason} during '{op}'; "
                                "a new agent will be started for the next task") from None
            if self._may_have_lapsed():  # (a pause): no reply is taken unconfirmed
                self._confirm_held(stream, f"the reply to '{op}' is not reported as this host's state")
            return reply

    def _exchange(self, stream: Stream, request: bytes, payload: IO[bytes] | None, rewind: int | None,
                  backup: float | None, notes: list[str] | None) -> tuple[Stream, float | None]:
        """Deliver the request (to a new agent, once, where the agent was found gone before it
        read it); the stream the reply comes on, and the reply's deadline."""
        if self._deliver(stream, request, payload, backup):
            return stream, backup
        self._drop(f"ended before it read the request ({stream.exit_text()})")
        if payload is not None and rewind is None:
            raise EOFError("the agent ended before it read the request")
        if payload is not None and rewind is not None:
            payload.seek(rewind)
        stream = self._ensure_started(notes, backup)
        if backup is not None:
            backup += self.turn_wait
        if not self._deliver(stream, request, payload, backup):
            raise EOFError("the new agent ended before it read the request")
        return stream, backup

    def exec(self, argv: Sequence[str], *, stdin: IO[bytes] | None, cwd: str | None, timeout: float | None,
             notes: list[str] | None = None, shown: str | None = None) -> CommandResult:
        """Run a plain command in an agent worker (remote/commands.py): a fork+exec on the
        target, with the deadline, tree kill and held-output rules of the watchdog."""
        start = time.monotonic()
        command = shlex.join(argv)
        request: ExecArgs = {"argv": list(argv), "cwd": cwd, "timeout": timeout}
        raw = self.call(EXEC.name, cast("dict[str, Any]", request),
                        timeout=None if timeout is None else timeout + EXEC_GRACE_S,
                        payload=stdin, notes=notes, shown=shown or f"agent exec {command}")
        took = time.monotonic() - start
        if "rc" not in raw:  # an error reply (protocol.ErrorReply) instead of ExecReply
            if raw.get("timed_out"):  # the worker itself did not answer: the agent stopped its tree
                return CommandResult(command, 124, b"", str(raw.get("error", "")).encode(), took, timed_out=True)
            raise AgentLost(f"remote agent could not run the command: {raw.get('error', raw)}")
        reply = cast("ExecReply", raw)
        return CommandResult(command, reply["rc"], reply["stdout"].encode("latin-1"),
                             reply["stderr"].encode("latin-1"), took, reply["timed_out"], tuple(reply["warnings"]))

    def request(self, op: AgentOp[ArgsT, ReplyT], args: ArgsT, *, timeout: float | None = None,
                payload: IO[bytes] | None = None, notes: list[str] | None = None,
                shown: str | None = None) -> ReplyT:
        """call() with the op's request and reply types (connections/ops.py). The reply may
        instead carry only protocol.ErrorReply's keys: the caller looks for them first."""
        reply = self.call(op.name, cast("dict[str, Any]", args), timeout=timeout, payload=payload, notes=notes,
                          shown=shown)
        return cast(ReplyT, reply)

    def _deliver(self, stream: Stream, request: bytes, payload: IO[bytes] | None,
                 deadline: float | None) -> bool:
        """Send a request (and its payload); True once the agent acknowledged it."""
        try:
            stream.send(frame(JSON, request))
            if payload is not None:
                while chunk := payload.read(CHUNK):
                    stream.send(frame(DATA, chunk))
                    self._woke()  # running, and in touch with the agent: a large payload is no gap
                stream.send(frame(END, b""))
        except (OSError, EOFError):
            pass  # gone already: the acknowledgement below cannot come either
        self._woke()
        idle.run(keep_errors=True)  # what this thread put off, while the agent works on the request
        self._woke()
        try:
            self._read_frame(stream, deadline, ACK)
        except (OSError, EOFError):
            return False
        return True

    def close(self, wait_exit: bool = False) -> bool:
        """Close the agent's stdin: it kills any in-flight work and exits (Ctrl-C, end of run;
        with `wait_exit`, waited for: see Stream.close). True when its exit was seen."""
        stream, self._stream = self._stream, None
        return stream.close(wait_exit) if stream is not None else True

    def end(self) -> bool:
        """The end of the connection: no more heartbeats; the agent exits, waited for (its
        job locks are released once this returns). True when its session was seen to end.
        Locks found lost here or before are kept in lost_at_end."""
        self._stop_beats(BEAT_REPLY_S + BACKUP_GRACE_S)  # (a heartbeat under way may find them lost)
        self._check_at_end()
        ended = self.close(wait_exit=True)
        self._end_report()
        self.locks.clear()
        return ended

    def _check_at_end(self) -> None:
        """The run ends holding job locks: an agent gone, or a pause since it was last heard
        from that could have let the lease run out, is confirmed with it first (the end's EOF
        alone would look the same whether the locks were held to the end or not)."""
        if self.locks and self._lock.acquire(blocking=False):  # (else a request is in flight: interrupted)
            try:
                self._begin()
                stream = self._stream
                if stream is None or not stream.alive() or self._may_have_lapsed():
                    self._confirm_held(stream, None, at_end=True)
            except JobLocksLost:
                self._lost_told = False  # told by the run's end instead (lost_at_end)
            finally:
                self._lock.release()

    def hold(self, path: str, lease: float, host: str | None = None) -> None:
        """The agent took the job lock at `path` for this run with `lease` (for a task of the
        inventory `host`): the session keeps it leased from now on (the agent keeps the
        shortest lease of the locks it holds)."""
        self._hold(path, lease, host or self.connection.spec.name)
        self.keep_leased()

    def keep_leased(self, interval: float | None = None) -> None:
        """While this agent holds job locks, renew their lease every `interval` seconds (a
        quarter of the lease by default) when no request is in flight (a request renews it
        itself): the agent lets its locks go when a half-open connection stops delivering
        anything (remote/job_locks.py)."""
        if self._beats is not None:
            return

        def beat() -> None:
            if self.locks and self._lock.acquire(blocking=False):
                try:
                    self._beat()
                finally:
                    self._lock.release()

        self._beats = threading.Thread(target=self._beat_loop, args=(interval, beat), name="agent-lease",
                                       daemon=True)
        self._beats.start()

    def _beat(self) -> None:
        stream = self._stream
        if stream is None:
            return
        self._begin()
        deadline = time.monotonic() + BEAT_REPLY_S
        try:
            if self._deliver(stream, b'{"op":"beat","args":{}}', None, deadline):
                self._read_frame(stream, deadline, JSON)
                return
        except (OSError, EOFError, ValueError):  # TimeoutError is an OSError
            pass
        # Unanswered, a late reply would be read as the next request's: the stream is out of step.
        self._drop("did not answer its lease's heartbeat")

    def _drop(self, reason: str) -> str:
        self.close()
        if self.locks:  # the kernel released them with the agent
            reason += f"; the job lock(s) it held ({', '.join(sorted(self.locks))}) went with it"
            self._locks_went(reason)
        self._lost = reason
        return reason

    def confirm_if_paused(self, what: str) -> None:
        """Around work done outside this agent (a bare exec, another session's agent) while it
        holds job locks: JobLocksLost when they were lost, or when a gap since the agent's last
        word (the heartbeat's, during that work) could have let their lease run out and the
        agent does not confirm it still holds them: `what` is then not reported as this host's."""
        with self._lock:
            self.check_locks()
            if not self.locks:
                return
            self._begin()
            if self._may_have_lapsed():
                self._confirm_held(self._stream, f"{what} is not reported as this host's state")

    def lose_locks(self, why: str) -> JobLocksLost:
        """The agent no longer holds locks this run took (a release it did not hold): the
        agent is stopped and the host out of the run as when the locks went with it."""
        self._drop(why)
        return self._told()

    def _confirm_held(self, stream: Stream | None, consequence: str | None, at_end: bool = False) -> None:
        """After a gap in which the lease may have run out (or with the agent found ended at the
        run's end): the agent says whether it still holds this run's locks (it exits when its
        lease runs out: one gone holds none). JobLocksLost, the agent stopped, when it does not."""
        held: list[Any] = []
        deadline = time.monotonic() + BEAT_REPLY_S
        request = json.dumps({"op": "job_held", "args": {"paths": sorted(self.locks)}}).encode()
        if self.connection.log:  # a request as any other (-vvv)
            self.connection.log(self.connection.spec.name, f"agent {request.decode()}")
        how = "did not answer whether it still held this run's locks"
        if stream is None or not stream.alive():
            how = f"had ended ({stream.exit_text() or 'gone'})" if stream is not None else "had ended"
        try:
            if stream is not None and self._deliver(stream, request, None, deadline):
                held = self._read_frame(stream, deadline, JSON).get("held") or []
                how = "answered that it no longer held this run's locks"
        except (OSError, EOFError, ValueError):  # TimeoutError is an OSError
            pass
        if self.locks <= set(held):
            self._gap = 0.0
            return
        lapsed = self._may_have_lapsed()  # else the agent ended (or failed) while this side was awake
        self._locks_lost = self._lapsed(consequence, at_end) if lapsed else self._unconfirmed(how, consequence, at_end)
        self._lost = "let its job locks go at their lease" if lapsed else how
        self.locks.clear()
        self.close()
        raise self._told()

    # -- start and greeting -----------------------------------------------------------------
    def _ensure_started(self, notes: list[str] | None, deadline: float | None) -> Stream:
        self.turn_wait = 0.0
        if self._stream is not None:
            if self._stream.alive():
                return self._stream
            self._drop(f"ended between tasks ({self._stream.exit_text()})")  # crashed or killed
        if self._locks_lost is not None:
            raise self._told()
        idle.run(keep_errors=True)  # a start may take seconds: what this thread put off goes first
        lost, self._lost = self._lost, None
        asked = time.monotonic()
        with self.connection.slots.held():
            # The wait for a turn (startslots.py) is this controller's: connect_timeout and the
            # task's deadline count from the turn.
            self.turn_wait = time.monotonic() - asked
            deadline = None if deadline is None else deadline + self.turn_wait
            reach_by = time.monotonic() + self.connection.spec.connect_timeout
            try:
                self._stream = self._start(notes, reach_by if deadline is None else min(deadline, reach_by))
            except TimeoutError:
                if deadline is not None and deadline < reach_by:
                    raise  # the task's deadline came first: the task timed out
                raise ConnectionFailed(self._not_reached()) from None
        self.starts += 1
        if lost and notes is not None:
            notes.append(f"remote agent restarted (now pid {self.pid}): the previous one {lost}")
        return self._stream

    def ensure_reached(self, notes: list[str] | None = None, deadline: float | None = None) -> None:
        """Start the agent if it is not running: proof that the connection and the wrapper
        chain reach the target. ConnectionFailed where they have not within connect_timeout,
        TimeoutError where the task's `deadline` (monotonic) came first, AgentStartFailed
        where they reach it but the agent cannot run there."""
        with self._lock:
            self._begin()
            try:
                self._ensure_started(notes, deadline)
            except Exception:
                idle.raise_kept()
                raise
            idle.raise_kept()

    def _not_reached(self) -> str:
        spec = self.connection.spec
        chain = " | ".join(shlex.join(getattr(layer, "prefix", ())) for layer in spec.wrapper)
        through = f"through the wrapper chain `{chain}`" if chain else "on the connection"
        return (f"the remote agent did not start within {spec.connect_timeout:g}s (connect_timeout) {through}: "
                "the host or a wrapper hangs before running the command; it was stopped")

    def _start(self, notes: list[str] | None, deadline: float) -> Stream:
        """Start the agent (cached, else inline); TimeoutError when it has not greeted by `deadline`."""
        python = self.connection.spec.python
        artifact = agent_artifact()
        if self._cacheable:
            stream = self.connection.spawn(start_argv(python), shown="<opsrunner-agent start: cached package>")
            hello, problem = self._greeting(stream, deadline, artifact)
            if hello is not None:
                return stream
            why = problem or stream.exit_text()
            stream.close()
            self.connection.slots.ensure_open()  # closed by the run's end: no second try inline
            if REFUSED in why:  # each try is another wrong password for sudo to delay and log
                raise AgentStartFailed(f"remote agent did not start: {why}")
            # Not cacheable here, or a cached copy that is not this version (or broken): remove
            # it, so the next run stores a good one, and start this agent inline.
            self.connection.run(["/bin/sh", "-c", UNCACHE, "opsrunner-uncache", cache_name()],
                                timeout=max(1.0, deadline - time.monotonic()))
            if why and notes is not None:
                notes.append(f"cached remote agent not used ({why}); started it inline")
            self._cacheable = False
        stream = self.connection.spawn(inline_argv(python),
                                       shown=shlex.join([python, "-S", "-c", "<opsrunner-agent inline>"]))
        with contextlib.suppress(OSError, EOFError):  # it ended first: the greeting says why
            stream.send(artifact)
        hello, problem = self._greeting(stream, deadline)
        if hello is None:
            detail = problem or stream.exit_text() or "no greeting"
            stream.close()
            raise AgentStartFailed(f"remote agent did not start: {detail}")
        return stream

    def _greeting(self, stream: Stream, deadline: float,
                  source: bytes | None = None) -> tuple[dict[str, Any] | None, str]:
        """(hello, "") when the agent is ours and current; (None, why) otherwise. TimeoutError
        (the stream closed: that stops what hangs) when nothing came by `deadline`. `source`
        is sent if the start script asks for it (the cache has no copy)."""
        self._buf = b""
        try:
            while MAGIC not in self._buf:
                if source is not None and NEED_SOURCE in self._buf:
                    self._buf = self._buf.replace(NEED_SOURCE, b"", 1)
                    with contextlib.suppress(OSError, EOFError):  # it ended first: see the caller
                        stream.send(source)
                    source = None
                if len(self._buf) > MAX_PREAMBLE:
                    return None, ""
                chunk = stream.recv(1 << 16, max(0.0, deadline - time.monotonic()))
                if not chunk:
                    return None, ""
                self._buf += chunk
            self._buf = self._buf[self._buf.index(MAGIC) + len(MAGIC):]
            hello = self._read_frame(stream, deadline, JSON)
        except TimeoutError:
            stream.close()
            raise
        except (OSError, EOFError, ValueError):
            return None, ""
        if hello.get("agent") != "opsrunner" or hello.get("protocol") != PROTOCOL \
                or hello.get("version") != agent_version():
            return None, (f"it reports protocol {hello.get('protocol')} version {hello.get('version')}, "
                          f"this controller needs protocol {PROTOCOL} version {agent_version()}")
        self.pid = int(hello["pid"])
        return hello, ""

    # -- frames -----------------------------------------------------------------------------
    def _read_exact(self, stream: Stream, size: int, deadline: float | None) -> bytes:
        while len(self._buf) < size:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise TimeoutError
            try:  # while locks are held, awake every quarter lease: a longer gap is a pause
                chunk = stream.recv(max(1 << 16, size - len(self._buf)), self._wait_slice(wait))
            except TimeoutError:
                self._woke()
                continue  # the deadline, if it has come, is told above
            self._woke()
            if not chunk:
                raise EOFError("the agent's output ended")
            self._buf += chunk
        data, self._buf = self._buf[:size], self._buf[size:]
        return data

    def _read_frame(self, stream: Stream, deadline: float | None, want: bytes) -> dict[str, Any]:
        """The next frame, which must be of kind `want`: a J frame's object, {} for an A frame."""
        head = self._read_exact(stream, HEAD_SIZE, deadline)
        kind, size = head[:1], frame_size(head)
        if kind != want or size > MAX_JSON:
            raise ValueError(f"protocol error: a {kind!r} frame of {size} bytes")
        body = self._read_exact(stream, size, deadline)
        if kind == ACK:
            return {}
        reply = json.loads(body)
        if not isinstance(reply, dict):
            raise ValueError("protocol error: the reply is not an object")
        return reply


#: Request arguments that carry a file's content: -vvv tells their size, never the bytes (a
#: copy's content may be a secret, and masking cannot follow it into base64).
_CONTENT_ARGS = ("content_b64",)


def _loggable(args: dict[str, Any]) -> dict[str, Any]:
    """A request's arguments as -vvv prints them: content as its size."""
    if not any(key in args for key in _CONTENT_ARGS):
        return args
    return {key: (f"<{len(value) * 3 // 4 - value.count('=')} bytes>" if key in _CONTENT_ARGS and isinstance(value, str)
                  else value) for key, value in args.items()}
