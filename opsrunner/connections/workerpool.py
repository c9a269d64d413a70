"""ssh connections held by worker processes (`--ssh-workers N`): the controller's side.

At 50 hosts one controller process is busy all the time: every host's key exchange, every
packet's cipher and paramiko's transport thread per host run in Python under its one GIL,
beside the engine. On a machine with cores to spare, worker processes (workerproc.py) hold
the hosts' ssh connections, a share each, and the engine talks to them over pipes: a
command is one message out and its result back; an agent's stream is its bytes, pushed by
the worker as they arrive. What a connection does is unchanged (SSHConnection's own code runs
in the worker); the engine, its strategy, the agent sessions and everything across hosts stay
here. bench/RESULTS.md (run 27) has where it pays and where one process is faster.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

from opsrunner.connections import workerseed
from opsrunner.connections.base import CommandLogger, Connection, ConnectionSpec
from opsrunner.connections.startslots import StartSlots
from opsrunner.connections.streams import CHUNK, Stream
from opsrunner.connections.workerseed import ForkedWorker
from opsrunner.connections.workerwire import read_message, rebuild_exception, write_message
from opsrunner.errors import ConnectionFailed
from opsrunner.results import CommandResult

#: How long the pool's close waits for a worker to end after its stdin closes (it closes its
#: hosts' connections first), before killing it.
WORKER_EXIT_WAIT_S = 15.0
#: How many bytes sent to one stream may wait in its worker before a send waits: a channel in
#: this process waits for the ssh window; a worker must not hold a whole payload per host.
UNACKED_LIMIT = 4 << 20


class WorkersFailed(ConnectionFailed):
    """The ssh worker processes could not be started."""


class _Reply:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None


class WorkerProcess:
    """One worker: its pipes, the requests waiting for their replies, and its streams. Its
    process is a Popen (spawned here) or a ForkedWorker (forked by the seed, workerseed.py):
    both have pid, stdin, stdout, wait() and kill()."""

    def __init__(self, index: int, proc: subprocess.Popen[bytes] | ForkedWorker) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self._in: IO[bytes] = proc.stdin
        self._write_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Reply] = {}
        self.streams: dict[int, ProxyStream] = {}
        self.gone: str | None = None
        threading.Thread(target=self._read, args=(proc.stdout,), name=f"ssh-worker-{index}",
                         daemon=True).start()

    @classmethod
    def spawned(cls, index: int) -> WorkerProcess:
        # The worker imports what this process imports, from its sys.path (workerseed.boot). Its
        # own process group: a terminal's Ctrl-C goes to the controller, which handles it.
        argv, env = workerseed.boot("from opsrunner.connections.workerproc import main; main()")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, process_group=0)
        except OSError as exc:
            raise WorkersFailed(f"could not start an ssh worker process ({sys.executable}): {exc}") from None
        return cls(index, proc)

    def new_id(self) -> int:
        return next(self._ids)

    def post(self, message: tuple[Any, ...]) -> None:
        with self._write_lock:
            if self.gone is not None:
                raise ConnectionFailed(self.gone)
            try:
                write_message(self._in, message)
            except (OSError, ValueError):
                raise ConnectionFailed(f"the ssh worker process (pid {self.proc.pid}) is gone") from None

    def ask(self, kind: str, *args: Any) -> _Reply:
        """Send a request; its reply comes to the returned _Reply (answer() waits for it)."""
        req_id = self.new_id()
        reply = self._waiting[req_id] = _Reply()
        try:
            self.post((kind, req_id, *args))
        except ConnectionFailed:
            self._waiting.pop(req_id, None)  # the reader may have failed every request already
            raise
        return reply

    def answer(self, reply: _Reply) -> Any:
        reply.done.wait()
        if reply.ok:
            return reply.value
        raise rebuild_exception(*reply.value)

    def call(self, kind: str, *args: Any) -> Any:
        return self.answer(self.ask(kind, *args))

    def _read(self, source: IO[bytes]) -> None:
        try:
            while (message := read_message(source)) is not None:
                kind = message[0]
                if kind == "reply":
                    reply = self._waiting.pop(message[1], None)
                    if reply is not None:
                        reply.ok, reply.value = message[2], message[3]
                        reply.done.set()
                elif (stream := self.streams.get(message[1])) is not None:
                    stream.arrived(kind, message[2] if len(message) > 2 else None)
        except Exception:  # a garbled pipe ends the worker's hosts as its death does
            pass
        finally:
            self._lost()

    def _lost(self) -> None:
        try:
            code = self.proc.wait(1.0)
            how = ("its status unknown" if code is None
                   else f"killed by signal {-code}" if code < 0 else f"exit status {code}")
        except subprocess.TimeoutExpired:
            how = "its output ended"
        except Exception:  # whatever its wait met, its hosts' requests must still end below
            how = "its status unknown"
        with self._write_lock:
            self.gone = f"the ssh worker process (pid {self.proc.pid}) that held this host's connection ended ({how})"
        for reply in list(self._waiting.values()):
            reply.ok, reply.value = False, ("ConnectionFailed", self.gone)
            reply.done.set()
        self._waiting.clear()
        for stream in list(self.streams.values()):
            stream.arrived("eof", None)

    def stop(self) -> None:
        """Close its stdin (it closes its connections, then exits); kill it if it does not."""
        with self._write_lock, contextlib.suppress(OSError):
            self._in.close()
        try:
            self.proc.wait(WORKER_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if isinstance(self.proc, ForkedWorker):
            self.proc.release()


class WorkerPool:
    """The run's ssh worker processes, started at once; hosts are dealt to them in turn.
    Forked by the seed where this process started one (workerseed.py), else spawned."""

    def __init__(self, count: int) -> None:
        self.workers: list[WorkerProcess] = []
        self._seed = workerseed.take()
        try:
            self.workers = self._forked(count)
            for index in range(len(self.workers), count):  # one by one: close() stops those started
                self.workers.append(WorkerProcess.spawned(index))
        except WorkersFailed:
            self.close()
            raise
        self._dealt = itertools.count()

    def _forked(self, count: int) -> list[WorkerProcess]:
        if self._seed is None:
            return []
        try:
            return [WorkerProcess(i, proc) for i, proc in enumerate(self._seed.fork(count))]
        except BaseException as exc:  # the seed ends with the pool that never was
            self._seed.close()
            self._seed = None
            if isinstance(exc, OSError):  # it is gone (killed, its imports failed, or hung): spawn them instead
                return []
            raise  # Ctrl-C, SIGTERM

    def connection(self, spec: ConnectionSpec, log: CommandLogger | None, slots: StartSlots) -> ProxyConnection:
        worker = self.workers[next(self._dealt) % len(self.workers)]
        return ProxyConnection(spec, log, slots, worker=worker)

    def close(self) -> None:
        stoppers = [threading.Thread(target=w.stop, daemon=True) for w in self.workers]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        if self._seed is not None:
            self._seed.close()


class ProxyConnection(Connection):
    """A host's ssh connection, held by a worker process."""

    def __init__(self, spec: ConnectionSpec, log: CommandLogger | None, slots: StartSlots, *,
                 worker: WorkerProcess) -> None:
        super().__init__(spec, log, slots)
        self._worker = worker
        self._id = worker.new_id()
        self._lock = threading.Lock()
        self._opened = False

    def open(self) -> None:
        with self._lock:
            if self._opened:
                return
            with self.slots.held():  # the run's start slots are held here (startslots.py)
                self._worker.call("open", self._id, self.spec)
            self._opened = True

    def close(self) -> None:
        self._close_agent()
        with self._lock:
            self._opened = False
            with contextlib.suppress(ConnectionFailed):  # a worker that is gone took its connections
                self._worker.call("close", self._id)

    def session_lost(self) -> bool:
        try:
            return bool(self._worker.call("session_lost", self._id))
        except ConnectionFailed:
            return True

    def lost_because(self) -> str | None:
        return self._worker.gone

    def _execute(self, argv: Sequence[str], stdin: bytes | IO[bytes] | None,
                 timeout: float | None) -> CommandResult:
        self.open()  # connecting is not part of the command's time
        if stdin is None or isinstance(stdin, bytes):
            result: CommandResult = self._worker.call("execute", self._id, list(argv), stdin, timeout)
            return result
        feed = self._worker.new_id()
        reply = self._worker.ask("execute", self._id, list(argv), ("feed", feed), timeout)
        try:
            while chunk := stdin.read(CHUNK):
                self._worker.post(("feed", feed, chunk))
        finally:
            self._worker.post(("feed", feed, None))
        result = self._worker.answer(reply)
        return result

    def _spawn(self, argv: Sequence[str]) -> Stream:
        self.open()
        stream = ProxyStream(self._worker, self._worker.new_id())
        self._worker.streams[stream.sid] = stream
        try:
            self._worker.call("spawn", self._id, stream.sid, list(argv))
        except BaseException:
            self._worker.streams.pop(stream.sid, None)
            raise
        return stream


class ProxyStream(Stream):
    """A channel held by a worker: what it receives is here already when read."""

    def __init__(self, worker: WorkerProcess, sid: int) -> None:
        self._worker = worker
        self.sid = sid
        self._buf = bytearray()
        self._changed = threading.Condition()
        self._eof = False
        self._closed: bool | None = None  # once closed: whether the command's exit was seen
        self._send_error: str | None = None
        self._unacked = 0

    def arrived(self, kind: str, data: Any) -> None:
        with self._changed:
            if kind == "data":
                self._buf += data
            elif kind == "acked":
                self._unacked -= data
            elif kind == "eof":
                self._eof = True
            else:
                self._send_error = data
            self._changed.notify_all()

    def send(self, data: bytes) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._unacked < UNACKED_LIMIT or self._eof or self._send_error is not None)
            if self._closed is not None or (self._eof and self._unacked >= UNACKED_LIMIT):
                raise EOFError("the agent's channel is closed")
            if self._send_error is not None:
                raise OSError(f"ssh: {self._send_error}")
            self._unacked += len(data)
        try:
            self._worker.post(("send", self.sid, bytes(data)))
        except ConnectionFailed as exc:  # a Stream's send raises OSError or EOFError (agent.py reads them)
            raise EOFError(str(exc)) from None

    def recv(self, size: int, timeout: float | None) -> bytes:
        with self._changed:
            if not self._changed.wait_for(lambda: self._buf or self._eof, timeout):
                raise TimeoutError("timed out")
            data = bytes(self._buf[:size])
            del self._buf[:size]
            return data

    def close(self, wait_exit: bool = False) -> bool:
        if self._closed is None:
            try:
                exited = bool(self._worker.call("stream_close", self.sid, wait_exit))
            except ConnectionFailed:
                exited = False
            with self._changed:  # a recv waiting on another thread returns b"", as on a closed channel
                self._closed, self._eof = exited, True
                self._changed.notify_all()
            self._worker.streams.pop(self.sid, None)
        return self._closed

    def alive(self) -> bool:
        return self._closed is None and not self._eof

    def exit_text(self) -> str:
        try:
            return str(self._worker.call("exit_text", self.sid))
        except ConnectionFailed:
            return "connection lost"
