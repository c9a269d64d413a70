"""A server a fixture starts dies with the pytest that started it, however pytest ends.

A fixture's teardown stops its server; a pytest killed mid-way (SIGKILL, a CI timeout, the
OOM killer) runs no teardown, and the server (PostgreSQL, which pg_ctl daemonizes into a
session of its own; an sshd; the dashboard) would run on with its parent gone. So each
server gets a watchdog: a small Python process started before the server, in a session of
its own (a kill of pytest's process group does not take it along), holding the read end of
a pipe whose write end only pytest holds (not inheritable: the processes pytest starts do
not keep it open). When the pipe reaches EOF - pytest exited, however - or pytest's pid is
gone (a pidfd: also where a process forked from pytest keeps the pipe open), it stops the
servers it was told of, each by its pid and only while that pid is still the same process
(its start time, or for a pid read from a pid file, its command line naming the server's
own directory): the stop signal, then SIGKILL after STOP_GRACE_S. Then it removes the
server's temp dir where told to, and nothing else. A teardown that stops the server itself
closes the pipe (`close()`): the watchdog finds nothing left to stop and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

#: How long a server gets to stop on its stop signal before SIGKILL.
STOP_GRACE_S = 10.0

WATCHDOG = r"""
import os, select, shutil, signal, sys, time
read_fd, parent, grace, remove = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
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
    if os.getppid() != parent:  # pytest died before the pidfd: it may be another process's
        raise OSError
    watched.append(pidfd)
except (AttributeError, OSError):
    if os.getppid() != parent:  # pytest is gone already: read what it told, without waiting
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
def resolve(target):
    if target[0] != "pidfile":
        return target
    path = target[1]
    deadline = time.monotonic() + 3  # a server starting when pytest died: its pid file comes
    while time.monotonic() < deadline:
        try:
            with open(path) as fh:
                return ["cmd", fh.readline().strip(), target[2], target[3]]
        except (OSError, ValueError):
            if not os.path.isdir(os.path.dirname(path)):
                return None
            time.sleep(0.05)
    return None
for target in [t for t in map(resolve, targets) if t]:
    try:
        if not same(target):
            continue
        os.kill(int(target[1]), int(target[3]))
    except (OSError, ValueError):
        continue
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and same(target):
        time.sleep(0.05)
    if same(target):
        try:
            os.kill(int(target[1]), signal.SIGKILL)
        except OSError:
            pass
if remove:
    shutil.rmtree(remove, ignore_errors=True)
"""


def start_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


class Lifeline:
    """The watchdog of one server (started before it); told its pid (`watch`) or its pid file
    (`watch_pidfile`) once known. `remove`: the server's own temp dir, removed once it is stopped."""

    def __init__(self, remove: Path | None = None) -> None:
        read_fd, self._write_fd = os.pipe()  # both not inheritable; the read end is passed on alone
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", WATCHDOG, str(read_fd), str(os.getpid()), str(STOP_GRACE_S),
                 str(remove or "")], pass_fds=(read_fd,), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except BaseException:
            os.close(self._write_fd)
            raise
        finally:
            os.close(read_fd)

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
        """The server was stopped by its owner: the watchdog finds nothing to stop and exits."""
        with contextlib.suppress(OSError):
            os.close(self._write_fd)
        try:
            self.proc.wait(STOP_GRACE_S + 10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
