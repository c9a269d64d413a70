# opsrunner-agent part 5: the job lock. A keeper process takes flock() on a lock file beside
# the job's pidfile and holds it while the controller keeps this command's channel open:
# EOF on stdin (the controller closed the channel, died, or the connection dropped), a
# "release" line, or a lease without heartbeat ends the keeper, and the kernel drops the
# flock with it. So no lock outlives its run, and a dead holder can never block a restart.
# The file's content names the holder, for the "locked by" message of a second run.
import errno
import fcntl
import json
import os
import socket
import time
from select import POLLERR, POLLHUP, POLLIN
from select import poll as _poll  # `select` is procs.py's function

LOCK_POLL_S = 0.1


def _lock_file(args):
    if args.get("path"):
        return args["path"]
    return pidfile_paths(args["pidfile"])["lock"]


def _read_record(fd):
    try:
        raw = os.pread(fd, 65536, 0)
        return json.loads(raw.decode("utf-8")) if raw.strip() else None
    except (OSError, ValueError):
        return None


def _try_lock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


def _live_holder(fd):
    """The holder record, once it names a keeper that is alive (pid and start time match)."""
    deadline = time.time() + 2.0
    record = None
    while True:
        record = _read_record(fd)
        if record and alive(int(record.get("keeper_pid", 0)), record.get("keeper_start")):
            return record
        if time.time() >= deadline:  # a fresh holder has not written its record yet
            return record or {}
        time.sleep(0.05)


def _busy(path, fd):
    holder = _live_holder(fd)
    return {"busy": True, "path": path, "holder": holder}


def op_lock_hold(args):
    path = _lock_file(args)
    if args.get("probe"):  # check mode: say whether it is free; create nothing
        return _probe(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    deadline = time.time() + float(args.get("wait") or 0)
    while not _try_lock(fd):
        if time.time() >= deadline:
            return _busy(path, fd)
        time.sleep(LOCK_POLL_S)
    stale = _read_record(fd)  # left by a keeper that died without releasing (kill -9, reboot)
    me = read_proc(os.getpid())
    record = dict(args.get("holder") or {})
    record.update(keeper_pid=os.getpid(), keeper_start=me.start if me else None,
                  target=socket.gethostname(), since=time.time())
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
    _say({"locked": True, "path": path, "stale": stale})
    why = _hold(float(args.get("lease") or 60))
    os.ftruncate(fd, 0)  # released in order: no record left behind
    os.close(fd)
    return {"released": True, "path": path, "why": why}


def _probe(path):
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return {"free": True, "path": path}
    try:
        if not _try_lock(fd):
            return _busy(path, fd)
        return {"free": True, "path": path}
    finally:
        os.close(fd)


def _say(reply):
    os.write(1, ("\n" + json.dumps(reply) + "\n").encode("utf-8"))


def _hold(lease):
    """Block until the controller lets go; return why."""
    poller = _poll()
    poller.register(0, POLLIN | POLLHUP | POLLERR)
    poller.register(1, POLLERR | POLLHUP)
    last = time.time()
    while True:
        for fd, ev in poller.poll(1000):
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
            return "no heartbeat for %gs" % lease
