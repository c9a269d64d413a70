"""An ssh worker process: it holds the ssh connections of some of a run's hosts for the
controller (workerpool.py), so that their key exchanges, packets and transport threads run
beside the controller's engine instead of under its one GIL.

What it does is SSHConnection's own (ssh.py): connect, open channels, run commands. A stream
(the agent's channel) pushes what arrives to the controller as it comes, so the controller's
read of an agent's reply is a wait on data already there, not a request of its own.

It runs in a process group of its own (a terminal's Ctrl-C goes to the controller only) and
ignores SIGINT and SIGTERM (a service manager's stop reaches every process of the service):
the controller, which handles them, still needs its connections to stop the run's steps and
record what they did. It ends when the controller closes its stdin (or dies).
"""

from __future__ import annotations

import io
import os
import queue
import signal
import sys
import threading
import time
from typing import IO, Any

from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.ssh import SSHConnection
from opsrunner.connections.startslots import StartSlots
from opsrunner.connections.streams import Stream
from opsrunner.connections.workerwire import exception_fields, read_message, write_message
from opsrunner.results import CommandResult

#: The run's start slots are the controller's (it holds one while a host opens here).
_UNLIMITED = 1 << 30
#: How long the worker's end waits for its connections to close (their agents to exit).
CLOSE_WAIT_S = 15.0


class _Fed(io.RawIOBase):
    """A command's stdin, as the controller sends it in chunks (None ends it)."""

    def __init__(self) -> None:
        self.chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._left = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while not self._left and not self._done:
            chunk = self.chunks.get()
            if chunk is None:
                self._done = True
            else:
                self._left = chunk
        if size < 0 or size >= len(self._left):
            data, self._left = self._left, b""
        else:
            data, self._left = self._left[:size], self._left[size:]
        return data


class _Pushed:
    """A stream of this worker: what arrives is pushed to the controller; what the controller
    sends is written in order by a thread of its own (a full window blocks it, not the worker)."""

    def __init__(self, worker: Worker, sid: int, stream: Stream) -> None:
        self.worker = worker
        self.sid = sid
        self.stream = stream
        self.outgoing: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._push, name=f"push-{sid}", daemon=True).start()
        threading.Thread(target=self._write, name=f"write-{sid}", daemon=True).start()

    def _push(self) -> None:
        try:
            while True:
                data = self.stream.recv(1 << 16, None)
                if not data:
                    break
                self.worker.send(("data", self.sid, data))
        except Exception:  # a lost channel is an end of the stream like any other
            pass
        self.worker.send(("eof", self.sid))

    def _write(self) -> None:
        while (data := self.outgoing.get()) is not None:
            try:
                self.stream.send(data)
            except Exception as exc:  # told to the controller, which raises it on its next send
                self.worker.send(("senderr", self.sid, f"{type(exc).__name__}: {exc}"))
                return
            self.worker.send(("acked", self.sid, len(data)))  # the controller may send that much more


class Worker:
    """Serves the controller's requests: each that waits runs on a thread of its own."""

    def __init__(self, source: IO[bytes], out: IO[bytes]) -> None:
        self.source = source
        self.out = out
        self._write_lock = threading.Lock()
        self.slots = StartSlots(_UNLIMITED)
        self.conns: dict[int, SSHConnection] = {}
        self.streams: dict[int, _Pushed] = {}
        self.stream_conn: dict[int, int] = {}
        self.feeds: dict[int, _Fed] = {}
        self.ended: dict[int, str] = {}

    def send(self, message: tuple[Any, ...]) -> None:
        with self._write_lock:
            write_message(self.out, message)

    def serve(self) -> None:
        while (message := read_message(self.source)) is not None:
            kind = message[0]
            if kind == "send":  # to a stream closed meanwhile (a run's end): dropped, as by its channel
                if (pushed := self.streams.get(message[1])) is not None:
                    pushed.outgoing.put(message[2])
            elif kind == "feed":
                if (fed := self.feeds.get(message[1])) is not None:
                    fed.chunks.put(message[2])
            else:
                if kind == "execute" and isinstance(message[4], tuple):  # stdin follows as "feed"s
                    self.feeds[message[4][1]] = _Fed()
                threading.Thread(target=self._answer, args=message, daemon=True).start()
        self._close_all()

    def _answer(self, kind: str, req_id: int, *args: Any) -> None:
        try:
            value = getattr(self, f"op_{kind}")(*args)
        except BaseException as exc:  # every failure goes back to the caller
            self.send(("reply", req_id, False, exception_fields(exc)))
        else:
            self.send(("reply", req_id, True, value))

    # -- requests ---------------------------------------------------------------------------
    def op_open(self, cid: int, spec: ConnectionSpec) -> None:
        conn = self.conns.get(cid)
        if conn is None:
            conn = self.conns[cid] = SSHConnection(spec, None, self.slots)
        conn.open()

    def op_close(self, cid: int) -> None:
        conn = self.conns.pop(cid, None)
        for sid in [s for s, c in self.stream_conn.items() if c == cid]:
            del self.stream_conn[sid]
            pushed = self.streams.pop(sid, None)
            if pushed is not None:
                pushed.outgoing.put(None)
        if conn is not None:
            conn.close()

    def op_session_lost(self, cid: int) -> bool:
        conn = self.conns.get(cid)
        return conn is None or conn.session_lost()

    def op_execute(self, cid: int, argv: list[str], stdin: bytes | tuple[str, int] | None,
                   timeout: float | None) -> CommandResult:
        if not isinstance(stdin, tuple):
            return self.conns[cid]._execute(argv, stdin, timeout)
        try:  # the rest of its stdin may still be on its way: the feed stays until the command ends
            return self.conns[cid]._execute(argv, self.feeds[stdin[1]], timeout)  # type: ignore[arg-type]
        finally:
            self.feeds.pop(stdin[1], None)

    def op_spawn(self, cid: int, sid: int, argv: list[str]) -> None:
        stream = self.conns[cid]._spawn(argv)
        self.streams[sid] = _Pushed(self, sid, stream)
        self.stream_conn[sid] = cid

    def op_stream_close(self, sid: int, wait_exit: bool) -> bool:
        pushed = self.streams.pop(sid, None)
        self.stream_conn.pop(sid, None)
        if pushed is None:
            return True
        pushed.outgoing.put(None)
        exited = pushed.stream.close(wait_exit)
        self.ended[sid] = pushed.stream.exit_text()  # what exit_text says after the close
        return exited

    def op_exit_text(self, sid: int) -> str:
        pushed = self.streams.get(sid)
        if pushed is not None:
            return pushed.stream.exit_text()
        return self.ended.get(sid, "connection lost")

    def _close_all(self) -> None:
        closers = [threading.Thread(target=conn.close, daemon=True) for conn in self.conns.values()]
        for closer in closers:
            closer.start()
        deadline = time.monotonic() + CLOSE_WAIT_S  # one wait for all: the controller may be gone
        for closer in closers:
            closer.join(max(0.0, deadline - time.monotonic()))


def serve_pipes(source: IO[bytes], out: IO[bytes]) -> None:
    """Serve the controller over these pipes until it closes `source`, then exit (the
    transports' threads are daemons: nothing to wait for)."""
    Worker(source, out).serve()
    out.close()
    os._exit(0)


def main() -> None:
    """A worker started on its own (workerpool.py): its pipes are its stdin and stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The protocol has stdout to itself: a stray print goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve_pipes(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
