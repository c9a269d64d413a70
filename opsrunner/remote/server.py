# opsrunner-agent: the long-lived agent loop (one per host connection), speaking
# protocol.py on stdin/stdout after a MAGIC preamble (anything a wrapper printed before it
# is skipped by the controller).
# No pickle: requests and replies are JSON. Each request runs in a forked worker (a child
# subreaper, so nothing it starts escapes its tree): a deadline or the controller going
# away (EOF on stdin) kills that whole tree. The worker's fds 0/1/2 are the payload (or
# /dev/null) and /dev/null, so nothing it starts holds the connection open. EOF on stdin
# between requests ends the agent: it leaves nothing behind.
# A worker whose request had no payload and that is left exactly as it started (no child
# or orphan alive, the same descriptors, environment and directory) replies with a K frame
# instead of J and serves the next request without a payload: a fork and an exit of this
# Python less per task (~1.5 ms of CPU on the target).
from __future__ import annotations

import os
import select
import sys
import time

from .agent import dispatch
from .files import data_digest
from .protocol import (
    ACK,
    END,
    HEAD_SIZE,
    JSON,
    KEEP,
    LOCK_OPS,
    MAGIC,
    PROTOCOL,
    frame,
    frame_size,
    package_digest_input,
)
from .watchdog import PR_SET_CHILD_SUBREAPER, ignored, kill_descendants, load_prctl
from .wire import json_dumps, json_loads, read_frame, write_all

# typing and the annotations' types are imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from _ctypes import CFuncPtr
    from types import FrameType
    from typing import Mapping, NoReturn, Tuple

    from .job_locks import HeldLocks
    from .protocol import ErrorReply

    #: A reply frame: (kind, body).
    Frame = Tuple[bytes, bytes]
else:
    import _signal as signal  # the C module: `signal` imports enum (~3 ms at every start)

_PRCTL: CFuncPtr | None = None


def package_sources() -> dict[str, bytes]:
    """{file name: bytes} of this package's modules, as the controller shipped them."""
    folder = os.path.dirname(os.path.abspath(__file__))
    sources = {}
    for name in os.listdir(folder):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as fh:
                sources[name] = fh.read()
    return sources


def version(sources: dict[str, bytes]) -> str:
    # files.py's builtin sha256: no OpenSSL load at every start
    return data_digest(package_digest_input(sources), "sha256")[:16]


def _kill_tree(worker: int) -> None:
    """Kill a worker and everything it started (the worker, stopped, keeps the orphans)."""
    with ignored(OSError):
        os.kill(worker, signal.SIGSTOP)
    kill_descendants(worker, 10)
    with ignored(OSError):
        os.kill(worker, signal.SIGKILL)
    os.waitpid(worker, 0)


class _Worker:
    """A worker forked ahead of its request (the fork is off the request's critical path).

    It waits on its request pipe; its stdin is the payload pipe (closed at once when the
    request has none), stdout and stderr are /dev/null. It runs an op and writes the reply on
    its reply pipe: a J frame, then it exits; or a K frame when it can serve again (see the
    header). A child subreaper, so nothing it starts leaves its tree; if the agent dies, it
    kills that tree and exits (PR_SET_PDEATHSIG)."""

    def __init__(self) -> None:
        req_r, self.req_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        payload_r, self.payload_w = os.pipe()
        agent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            _keep_only(0, 1, 2, req_r, reply_w, payload_r)
            _worker_main(req_r, reply_w, payload_r, agent)
        for fd in (req_r, reply_w, payload_r):
            os.close(fd)

    def close(self) -> None:
        for fd in (self.req_w, self.reply_r, self.payload_w):
            with ignored(OSError):
                os.close(fd)

    def retire(self, reaped: bool) -> None:
        """Close its pipes (a waiting worker sees EOF and exits) and reap it."""
        self.close()
        if not reaped:
            with ignored(ChildProcessError):  # reaped already (killed with its tree)
                os.waitpid(self.pid, 0)


def _keep_only(*keep: int) -> None:
    """In a new worker: close every descriptor but `keep`. A fork has all the agent's, among
    them the pipes of the other worker waiting: holding that one's stdin pipe, it kept a
    command reading its payload (a shell task's script) from ever seeing the end."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with ignored(OSError):  # the listing's own descriptor, closed already
                os.close(int(name))


#: Requests one worker may serve before a fresh fork replaces it (bounds any slow drift).
WORKER_REUSE_LIMIT = 500


def _orphaned(_sig: int, _frame_: FrameType | None) -> NoReturn:
    """The agent died (crashed, killed) while this worker ran: kill what it started, exit."""
    kill_descendants(os.getpid(), 5)
    os._exit(1)


def _worker_setup(payload_r: int, agent: int) -> None:
    signal.signal(signal.SIGTERM, _orphaned)
    if _PRCTL is not None:
        _PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _PRCTL(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: see _orphaned
    if os.getppid() != agent:  # it died before PDEATHSIG was set (not `== 1`: the agent may be
        os._exit(0)  # PID 1 of its own PID namespace, behind `unshare --pid` in a wrapper chain)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(payload_r, 0)
    os.dup2(null, 1)
    os.dup2(null, 2)
    for fd in (payload_r, null):
        os.close(fd)


def _worker_state() -> tuple[list[str], dict[str, str], str]:
    """What a request must leave as it found it for this worker to serve another."""
    return sorted(os.listdir("/proc/self/fd")), dict(os.environ), os.getcwd()


def _no_children() -> bool:
    """Nothing this worker started is alive or unreaped (as subreaper it inherits orphans too)."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _worker_main(req_r: int, reply_w: int, payload_r: int, agent: int) -> NoReturn:
    served, state = 0, None
    try:
        _worker_setup(payload_r, agent)
        state = _worker_state()
    except BaseException as exc:
        _worker_reply(reply_w, _failure(exc), False)
    while True:
        got = read_frame(req_r)
        if got is None:  # the agent ended or retired this worker before handing it a request
            os._exit(0)
        again = False
        try:
            request = json_loads(got[1].decode("utf-8"))
            if not isinstance(request, dict):  # (the agent lets only objects through)
                raise ValueError("a request must be a JSON object")
            data = json_dumps(dispatch(request)).encode("utf-8")
            served += 1
            again = (not request.get("payload") and served < WORKER_REUSE_LIMIT and _no_children()
                     and _worker_state() == state)
        except BaseException as exc:  # a reply in every case: the controller waits for one
            data = _failure(exc)
        _worker_reply(reply_w, data, again)


def _failure(exc: BaseException) -> bytes:
    """The reply to a request that failed in the worker."""
    try:
        return json_dumps({"error": f"agent worker: {type(exc).__name__}: {exc}"}).encode()
    except BaseException:
        return b'{"error": "agent worker failed"}'


def _worker_reply(reply_w: int, data: bytes, again: bool) -> None:
    """Write the reply (K: ready for another request); exit unless `again`."""
    try:
        write_all(reply_w, frame(KEEP if again else JSON, data))
    except BaseException:
        os._exit(0)
    if not again:
        os._exit(0)


class _Feeder:
    """Copies a request's D frames from stdin to the worker's stdin pipe, up to the E frame.

    If the worker stops reading (it failed or was killed), the rest is read and dropped so
    the stream stays in step; EOF on stdin marks the controller gone. A bare _thread (the
    threading module costs ~4 ms to import): `done` is held while it copies."""

    def __init__(self, pipe_w: int) -> None:
        import _thread
        self.pipe_w = pipe_w
        self.gone = False
        self.done = _thread.allocate_lock()
        self.done.acquire()
        _thread.start_new_thread(self._copy, ())

    def running(self) -> bool:
        return self.done.locked()

    def join(self) -> None:
        self.done.acquire()
        self.done.release()

    def _copy(self) -> None:
        try:
            self._run()
        finally:
            self.done.release()

    def _run(self) -> None:
        sink: int | None = self.pipe_w
        try:
            while True:
                got = read_frame(0)
                if got is None or got[0] == JSON:
                    self.gone = True
                    return
                if got[0] == END:
                    return
                if sink is not None:
                    try:
                        write_all(sink, got[1])
                    except OSError:
                        os.close(sink)
                        sink = None
        except (OSError, ValueError):
            self.gone = True
        finally:
            if sink is not None:
                os.close(sink)


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def _agent_reply(reply: ErrorReply) -> Frame:
    return JSON, json_dumps(reply).encode("utf-8")


def _await(worker: _Worker, deadline: float | None, feeder: _Feeder | None) -> tuple[Frame | None, bool, bool]:
    """((kind, reply body), gone, reaped): the worker's reply frame (passed on as it is), or
    the agent's own for a timeout or the worker's death; gone = the controller left."""
    poller = select.poll()
    poller.register(worker.reply_r, select.POLLIN)
    watching = feeder is None
    if watching:
        poller.register(0, select.POLLIN)  # no request is sent mid-op: readable = EOF
    buf, status = b"", None
    while True:
        if not watching and feeder is not None and not feeder.running():
            poller.register(0, select.POLLIN)  # the payload is in: from now on, as above
            watching = True
        wait_ms = 200 if deadline is None else max(0, min(200, int((deadline - time.time()) * 1000)))
        for fd, _ev in poller.poll(wait_ms):
            if fd == 0:
                if status is None:
                    _kill_tree(worker.pid)
                return None, True, True
            chunk = os.read(worker.reply_r, 1 << 16)
            buf += chunk
            if not chunk:
                poller.unregister(worker.reply_r)
        if feeder is not None and feeder.gone:
            if status is None:
                _kill_tree(worker.pid)
            return None, True, True
        if len(buf) >= HEAD_SIZE and len(buf) - HEAD_SIZE >= frame_size(buf):
            return (buf[:1], buf[HEAD_SIZE:HEAD_SIZE + frame_size(buf)]), False, status is not None
        if status is None:
            pid, raw = os.waitpid(worker.pid, os.WNOHANG)
            if pid:
                status = raw
                deadline = min(deadline or time.time() + 1, time.time() + 1)  # last reply bytes
                continue
        elif deadline is not None and time.time() >= deadline:  # (set with status)
            return _agent_reply({"error": f"agent worker {_status_text(status)} before replying"}), False, True
        if deadline is not None and time.time() >= deadline:
            _kill_tree(worker.pid)
            return _agent_reply({"timed_out": True, "error": "timed out; the operation and every process "
                                                             "it started were killed"}), False, True


def _handle(worker: _Worker, body: bytes, request: Mapping[str, object]) -> tuple[Frame | None, bool, bool]:
    """Hand one request to the waiting worker; ((kind, reply body), gone, reaped)."""
    timeout = request.get("timeout")
    deadline = time.time() + float(timeout) if timeout and isinstance(timeout, (int, float, str)) else None
    feeder = None
    with ignored(OSError):  # the worker died early: _await reports how
        write_all(worker.req_w, frame(JSON, body))
    if request.get("payload"):
        feeder = _Feeder(worker.payload_w)
        worker.payload_w = -1  # the feeder closes it
    elif worker.payload_w >= 0:
        os.close(worker.payload_w)
        worker.payload_w = -1
    reply, gone, reaped = _await(worker, deadline, feeder)
    if feeder is not None and not gone:
        feeder.join()
        gone = feeder.gone
    return reply, gone, reaped


def _no_inheritance() -> None:
    """Descriptors this agent inherited (a wrapper's extra session pipe, say) stay out of
    everything it starts: commands get only their stdin, stdout and stderr."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            with ignored(OSError):
                os.set_inheritable(int(name), False)


def serve(sources: dict[str, bytes] | None = None) -> None:
    global _PRCTL
    _PRCTL = load_prctl()  # native.py part: through _ctypes (the ctypes package costs ~4 ms)
    _no_inheritance()
    digest = version(sources if sources is not None else package_sources())
    hello = {"agent": "opsrunner", "protocol": PROTOCOL, "version": digest, "pid": os.getpid(),
             "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    try:
        write_all(1, MAGIC + frame(JSON, json_dumps(hello).encode()))
        _loop()
    except (OSError, ValueError) as exc:  # the connection broke or spoke nonsense: stop
        sys.stderr.write(f"opsrunner-agent: {exc}\n")


class _Workers:
    """The worker for requests without a payload (kept while it answers K) and, once needed,
    a fresh one for requests with a payload (which need an unused stdin pipe), each forked
    ahead of the request it will serve."""

    def __init__(self) -> None:
        self.plain = _Worker()
        self.fresh: _Worker | None = None

    def take(self, payload: bool) -> _Worker:
        if not payload or self.plain.payload_w >= 0:
            return self.plain
        if self.fresh is None:
            self.fresh = _Worker()
        return self.fresh

    def done(self, worker: _Worker, kind: bytes, reaped: bool) -> None:
        """After the reply: keep a worker that answered K; reap one that is exiting, fork the next."""
        if kind == KEEP and not reaped:
            return
        worker.retire(reaped)
        if worker is self.plain:
            self.plain = _Worker()
        else:
            self.fresh = _Worker()

    def close(self) -> None:
        """End them, reaped here: when the agent has exited (what the controller waits for),
        its workers are gone too."""
        for worker in (self.plain, self.fresh):
            if worker is not None:
                worker.retire(False)


def _loop() -> None:
    workers = _Workers()
    locks: HeldLocks | None = None  # job_locks.py, imported with the run's first job lock
    try:
        while True:
            if locks is not None and not locks.idle_wait():
                locks.release_all("no request within the lease")
                return  # a half-open connection: the controller is gone
            got = read_frame(0)
            if got is None:
                return
            if got[0] != JSON:
                raise ValueError(f"expected a request, got a {got[0]!r} frame")
            request = json_loads(got[1].decode("utf-8"))
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
            write_all(1, frame(ACK, b""))  # read: from here on it may run
            op = request.get("op")
            if op in LOCK_OPS:  # answered here: a lock lives as long as this process
                if locks is None:
                    from .job_locks import HeldLocks
                    locks = HeldLocks()
                args = request.get("args")
                lock_reply = locks.answer(str(op), args if isinstance(args, dict) else {})
                if lock_reply is None:
                    return
                write_all(1, frame(JSON, lock_reply))
                continue
            worker = workers.take(bool(request.get("payload")))
            answer, gone, reaped = _handle(worker, got[1], request)
            if gone or answer is None:
                return
            kind, reply = answer
            write_all(1, frame(JSON, reply))
            workers.done(worker, kind, reaped)
            if locks is not None:
                locks.last_request = time.monotonic()  # a request's run counts as the controller's beat
    finally:
        if locks is not None:  # first: a worker that is slow to reap must not hold them up
            locks.release_all("the connection closed")
        workers.close()


def main(sources: dict[str, bytes] | None = None) -> NoReturn:
    """The agent: `sources` are its modules' bytes where it runs from memory (inline)."""
    serve(sources)
    # Done (EOF): exit without the interpreter's teardown, so the controller that waits for
    # this exit at the end of a run waits as little as possible.
    sys.stderr.flush()
    os._exit(0)
