# opsrunner-agent part: the job locks this agent holds for its controller's run.
# The target's side of the job lock (one restart of a job at a time); the controller's side
# is opsrunner/locks/job_lock.py. A lock is flock() on LOCKFILE, held by this agent's own
# process (not a worker: the lock lives as long as the agent, which lives as long as the
# controller's connection) with a holder record written into the file. EOF on stdin (the
# controller closed the connection, died, or the connection dropped), an unlock request, or
# `lease` seconds without any request end it, and the kernel drops the flock with the
# process. So no lock outlives its run, and a dead holder can never block a restart.
# Forked workers close the lock's descriptor at their start (server.py's _keep_only), so
# nothing a task starts (the job least of all) can keep a lock alive.
from __future__ import annotations

import errno
import fcntl
import os
import select
import time

from .wire import json_dumps, json_loads

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    class LockRequest(TypedDict, total=False):
        """The job_lock op's request (locks/job_lock.py); holder is the run's LockHolder record."""
        path: str
        wait: float | None
        lease: float | None
        holder: dict[str, object] | None
        probe: bool

    class LockReply(TypedDict, total=False):
        """locked (and the stale record it took over, if any), busy (and the live holder's
        record), free (a probe), or released (and why)."""
        path: str
        locked: bool
        stale: dict[str, object] | None
        busy: bool
        holder: dict[str, object]
        free: bool
        released: bool
        why: str

POLL_S = 0.1


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (pid reuse gives a different one), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except (OSError, ValueError):
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] == b"Z":
        return None
    return int(fields[19])


def read_record(fd: int) -> dict[str, object] | None:
    """The holder record in the lock file; None when it is empty, unreadable or no JSON object."""
    try:
        raw = os.pread(fd, 65536, 0)
        record = json_loads(raw.decode("utf-8")) if raw.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


def keeper_alive(record: dict[str, object]) -> bool:
    """The record names a holding agent that is alive (pid and start time match)."""
    pid = record.get("keeper_pid") or 0
    start = record.get("keeper_start")
    return start is not None and isinstance(pid, (int, float, str)) and start_time(int(pid)) == start


def live_holder(fd: int) -> dict[str, object]:
    """The holder record, once it names an agent that is alive (pid and start time match)."""
    deadline = time.time() + 2.0
    while True:
        record = read_record(fd)
        if record and keeper_alive(record):
            return record
        if time.time() >= deadline:  # a fresh holder has not written its record yet
            return record or {}
        time.sleep(0.05)


def probe(path: str) -> LockReply:
    """Check mode: is it free? Creates nothing."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return {"free": True, "path": path}
    try:
        if not try_lock(fd):
            return {"busy": True, "path": path, "holder": live_holder(fd)}
        return {"free": True, "path": path}
    finally:
        os.close(fd)


def _controller_gone(wait_s: float) -> bool:
    """Wait up to wait_s on stdin; readable between requests means EOF: the controller left."""
    poller = select.poll()
    poller.register(0, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(int(wait_s * 1000)))


class HeldLocks:
    """This agent's job locks: {path: descriptor}, and the lease that ends them."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}
        self.lease: float | None = None
        self.last_request = time.monotonic()

    def answer(self, op: str, args: dict[str, object]) -> bytes | None:
        """The reply (JSON) to a lock op; None when the controller left while it waited."""
        self.last_request = time.monotonic()
        if op == "beat":
            return b"{}"
        if op == "job_held":  # an agent alive holds all its locks: the lease's end also ends it
            paths = args.get("paths")
            held = [p for p in (paths if isinstance(paths, list) else []) if os.path.expanduser(str(p)) in self.fds]
            return json_dumps({"held": held}).encode()
        try:
            if op == "job_unlock":
                return json_dumps(self.release(os.path.expanduser(str(args.get("path"))), "released")).encode()
            reply = self.take(args)  # type: ignore[arg-type]
        except (OSError, KeyError, TypeError, ValueError) as exc:  # the lock file cannot be made or locked
            return json_dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()
        self.last_request = time.monotonic()
        return None if reply is None else json_dumps(reply).encode()

    def take(self, request: LockRequest) -> LockReply | None:
        path = os.path.expanduser(request["path"])
        if request.get("probe"):
            return probe(path)
        if path in self.fds:
            return {"locked": True, "path": path, "stale": None}
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            reply = self._lock(fd, path, request)
        except BaseException:
            os.close(fd)  # a lock taken but not recorded (ENOSPC on the record) must not stay held
            raise
        if reply is None or not reply.get("locked"):
            os.close(fd)
            return reply
        self.fds[path] = fd
        lease = float(request.get("lease") or 60)
        self.lease = lease if self.lease is None else min(self.lease, lease)
        return reply

    def _lock(self, fd: int, path: str, request: LockRequest) -> LockReply | None:
        """flock fd (waiting up to the request's wait) and write the holder record into it."""
        deadline = time.monotonic() + float(request.get("wait") or 0)
        while not try_lock(fd):
            if time.monotonic() >= deadline:
                return {"busy": True, "path": path, "holder": live_holder(fd)}
            if _controller_gone(POLL_S):
                return None
        stale = read_record(fd)  # left by an agent that died without releasing (kill -9, reboot)
        record: dict[str, object] = dict(request.get("holder") or {})
        record.update(keeper_pid=os.getpid(), keeper_start=start_time(os.getpid()), target=os.uname()[1],
                      since=time.time())
        os.ftruncate(fd, 0)
        os.pwrite(fd, json_dumps(record).encode("utf-8"), 0)
        return {"locked": True, "path": path, "stale": stale}

    def release(self, path: str, why: str) -> LockReply:
        fd = self.fds.pop(path, None)
        if fd is None:
            return {"released": False, "path": path, "why": "not held"}
        try:
            os.ftruncate(fd, 0)  # released in order: no record left behind
        finally:
            os.close(fd)
        if not self.fds:
            self.lease = None
        return {"released": True, "path": path, "why": why}

    def release_all(self, why: str) -> None:
        for path in list(self.fds):
            self.release(path, why)

    def idle_wait(self) -> bool:
        """Between requests, while locks are held: wait for the next request, up to the lease.
        False when the lease ran out (a half-open connection never delivers EOF)."""
        while self.fds and self.lease is not None:
            left = self.lease - (time.monotonic() - self.last_request)
            if _controller_gone(max(0.0, min(left, 1.0))):
                return True  # a request (or EOF) is there to read, even one that came at the expiry
            if left <= 0:
                return False
        return True
