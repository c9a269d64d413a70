"""A server a fixture starts dies with the pytest that started it, however pytest ends.

A fixture's teardown stops its server; a pytest killed mid-way (SIGKILL, a CI timeout, the
OOM killer) runs no teardown, and the server (PostgreSQL, which pg_ctl daemonizes into a
session of its own; an sshd; the dashboard) would run on with its parent gone. So each
server gets a watchdog: a small Python process started before the server, in a session of
its own and reparented to init (a double fork: a kill of pytest's process group or of its
whole process tree does not take it along), reading on its stdin a pipe whose write end
only pytest holds (not inheritable: the processes pytest starts do not keep it open). When
the pipe reaches EOF - pytest exited, however - or pytest is gone (a pidfd, checked to be
pytest's by its start time: also where a process forked from pytest keeps the pipe open), it
stops the servers it was told of, each by its pid and only while that pid is still the same
process (its start time, or for a pid read from a pid file, its command line naming the
server's own directory), signalled through a pidfd opened before that check (a pid reused
meanwhile is not signalled): the stop signal, then SIGKILL after STOP_GRACE_S. Then it
removes the server's temp dir where told to, and nothing else: never where a server could
not be found (a pid file that never held a pid) or would not stop. A teardown that stops
the server itself closes the pipe (`close()`): the watchdog finds nothing left to stop and
exits.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

#: How long a server gets to stop on its stop signal before SIGKILL.
STOP_GRACE_S = 10.0

WATCHDOG = r"""
import os, select, shutil, signal, sys, time
if os.fork():  # reparented to init: a kill of pytest's whole process tree does not take it along
    os._exit(0)
parent, parent_start, grace, remove = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
read_fd = 0  # stdin: the pipe's read end; stdout: a pipe held until it exits (close() waits for that)
os.write(1, f"{os.getpid()}\n".encode())
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
def stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return None if fields[0] in "ZXx" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None
def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
watched = [read_fd]
try:
    pidfd = os.pidfd_open(parent)
    if stat(parent) != parent_start:  # pytest died before the pidfd: it may be another process's
        raise OSError
    watched.append(pidfd)
except (AttributeError, OSError):  # pytest is gone already: read what it told, without waiting
    os.set_blocking(read_fd, False)
buffer = b""
while watched:
    ready, _, _ = select.select(watched, [], [])
    if any(fd != read_fd for fd in ready):  # pytest is gone: what it told is still in the pipe
        os.set_blocking(read_fd, False)
    try:
        chunk = os.read(read_fd, 4096)
    except BlockingIOError:
        break
    if not chunk:
        break
    buffer += chunk
targets = [line.decode().split("\t") for line in buffer.split(b"\n") if line]
def same(target):
    kind, pid = target[0], int(target[1])
    if kind == "pid":  # pid, start time, stop signal
        return stat(pid) is not None and stat(pid) == int(target[2])
    return stat(pid) is not None and target[2] in cmdline(pid)  # pidfile: pid, a word of its command line
def resolve(target):  # the target as a pid; None: nothing to stop (its folder gone); False: not known
    if target[0] != "pidfile":
        return target
    path = target[1]
    deadline = time.monotonic() + 10  # a server starting when pytest died: its pid file comes, then its pid
    while time.monotonic() < deadline:
        try:
            with open(path) as fh:
                line = fh.readline()
            if line.endswith("\n") and line.strip().isdigit():
                return ["cmd", line.strip(), target[2], target[3]]
        except OSError:
            if not os.path.isdir(os.path.dirname(path)):
                return None
        time.sleep(0.05)
    return False
def stop(target):  # True once the target is not running (stopped here, or not that process any more)
    try:
        fd = os.pidfd_open(int(target[1]))
    except OSError:
        return True  # no such pid
    try:
        if not same(target):  # checked with the pidfd open: a signal by it reaches only this process
            return True
        signal.pidfd_send_signal(fd, int(target[3]))
        if not select.select([fd], [], [], grace)[0]:  # readable once it has exited
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            select.select([fd], [], [], grace)
        return not same(target)
    except OSError:
        return not same(target)
    finally:
        os.close(fd)
stopped = True
for target in map(resolve, targets):
    if target is False:
        stopped = False
    elif target and not stop(target):
        stopped = False
if remove and stopped:  # never under a server that may still run
    shutil.rmtree(remove, ignore_errors=True)
"""


def start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


class Lifeline:
    """The watchdog of one server (started before it); told its pid (`watch`) or its pid file
    (`watch_pidfile`) once known. `remove`: the server's own temp dir, removed once it is stopped."""

    def __init__(self, remove: Path | None = None) -> None:
        # Both ends not inheritable; the read end is the watchdog's stdin (a number of its own,
        # also where pytest's stdin is closed and os.pipe() returns 0).
        read_fd, self._write_fd = os.pipe()
        done_read, done_write = os.pipe()
        try:
            starter = subprocess.Popen(
                [sys.executable, "-S", "-c", WATCHDOG, str(os.getpid()), str(start_ticks(os.getpid())),
                 str(STOP_GRACE_S), str(remove or "")], start_new_session=True, stdin=read_fd, stdout=done_write,
                stderr=subprocess.DEVNULL)
            starter.wait()  # it forks the watchdog and exits
        except BaseException:
            os.close(self._write_fd)
            os.close(done_read)
            raise
        finally:
            os.close(read_fd)
            os.close(done_write)
        self._done = os.fdopen(done_read, "rb", buffering=0)
        #: The watchdog's pid (not a child of this process).
        self.pid = int(self._done.readline() or b"0")

    def _tell(self, *fields: object) -> None:
        os.write(self._write_fd, ("\t".join(str(f) for f in fields) + "\n").encode())

    def watch(self, pid: int, stop: int = signal.SIGTERM) -> None:
        """Stop process `pid` (this very process: its start time) when pytest dies."""
        self._tell("pid", pid, start_ticks(pid), int(stop))

    def watch_pidfile(self, path: Path, word: str, stop: int = signal.SIGTERM) -> None:
        """Stop the process whose pid `path` holds (first line) when pytest dies, where its
        command line names `word` (its data directory): read then, as it may not exist yet."""
        self._tell("pidfile", path, word, int(stop))

    def close(self) -> None:
        """The server was stopped by its owner: the watchdog finds nothing to stop and exits.
        Once only: a second call would close whatever file took the number since."""
        if self._write_fd < 0:
            return
        os.close(self._write_fd)
        self._write_fd = -1
        try:
            if not select.select([self._done], [], [], STOP_GRACE_S + 15)[0]:
                with contextlib.suppress(OSError):  # still running, so still this pid: it holds the pipe
                    fd = os.pidfd_open(self.pid)
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    os.close(fd)
        finally:
            self._done.close()
