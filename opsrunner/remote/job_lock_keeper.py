# opsrunner-lock-keeper: holds a job lock on the target (Python >= 3.8, stdlib only).
# The target's side of the job lock (one restart of a job at a time); the controller's side,
# which starts it and keeps its channel open, is opsrunner/locks/job_lock.py.
# usage: python3 -S -c SOURCE, with one JSON request line on stdin (LockRequest below):
#   {"path": LOCKFILE, "wait": SECONDS, "lease": SECONDS, "holder": {...}, "probe": BOOL}
# It takes flock() on LOCKFILE (waiting up to `wait`), writes the holder record into it,
# prints {"locked": true, ...} and then holds the lock while the controller keeps this
# command's channel open: EOF on stdin (the controller closed the channel, died, or the
# connection dropped), a "release" line, or `lease` seconds without a heartbeat line end
# it, and the kernel drops the flock with the process. So no lock outlives its run, and a
# dead holder can never block a restart. A busy lock prints {"busy": true, "holder": ...}.
# Sent alone, inline, and importing nothing of the package (like the watchdog): it runs as the
# command of its own exec session, held open for the run (so `pct exec` leaves it alone), and
# its stdin is its lease channel, so it cannot take part in the agent's cache handshake.
from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import socket
import sys
import time

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    class LockRequest(TypedDict, total=False):
        """The request line (locks/job_lock.py); holder is the run's LockHolder record."""
        path: str
        wait: float | None
        lease: float | None
        holder: dict[str, object] | None
        probe: bool

    class LockReply(TypedDict, total=False):
        """Each line the keeper prints: locked (and the stale record it took over, if any),
        busy (and the live holder's record), free (a probe), or released (and why)."""
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
        record = json.loads(raw.decode("utf-8")) if raw.strip() else None
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
    """The record names a keeper that is alive (pid and start time match)."""
    pid = record.get("keeper_pid") or 0
    start = record.get("keeper_start")
    return start is not None and isinstance(pid, (int, float, str)) and start_time(int(pid)) == start


def live_holder(fd: int) -> dict[str, object]:
    """The holder record, once it names a keeper that is alive (pid and start time match)."""
    deadline = time.time() + 2.0
    while True:
        record = read_record(fd)
        if record and keeper_alive(record):
            return record
        if time.time() >= deadline:  # a fresh holder has not written its record yet
            return record or {}
        time.sleep(0.05)


def say(reply: LockReply) -> None:
    os.write(1, (json.dumps(reply) + "\n").encode("utf-8"))


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


def hold(lease: float) -> str:
    """Block until the controller lets go; return why."""
    poller = select.poll()
    poller.register(0, select.POLLIN | select.POLLHUP | select.POLLERR)
    poller.register(1, select.POLLERR | select.POLLHUP)
    last = time.time()
    while True:
        for fd, _ in poller.poll(1000):
            if fd == 1:
                return "channel closed"
            try:
                data = os.read(0, 4096)
            except OSError:
                return "channel closed"
            if not data:
                return "channel closed"
            if b"release" in data:
                return "released"
            last = time.time()
        if time.time() - last > lease:
            return f"no heartbeat for {lease:g}s"


def main() -> None:
    request: LockRequest = json.loads(sys.stdin.buffer.readline().decode("utf-8"))
    path = os.path.expanduser(request["path"])
    if request.get("probe"):
        say(probe(path))
        return
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.time() + float(request.get("wait") or 0)
    while not try_lock(fd):
        if time.time() >= deadline:
            say({"busy": True, "path": path, "holder": live_holder(fd)})
            return
        time.sleep(POLL_S)
    stale = read_record(fd)  # left by a keeper that died without releasing (kill -9, reboot)
    record: dict[str, object] = dict(request.get("holder") or {})
    record.update(keeper_pid=os.getpid(), keeper_start=start_time(os.getpid()), target=socket.gethostname(),
                  since=time.time())
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
    say({"locked": True, "path": path, "stale": stale})
    why = hold(float(request.get("lease") or 60))
    os.ftruncate(fd, 0)  # released in order: no record left behind
    os.close(fd)
    try:
        say({"released": True, "path": path, "why": why})
    except OSError:  # the channel is gone: nobody to tell
        return


if __name__ == "__main__":  # sent alone with -c (locks/job_lock.py)
    main()
