"""The ssh workers' seed: one process, started as `opsrunner play` starts, that imports what an
ssh worker needs (paramiko, Fabric, workerproc.py) while the controller imports its own code and
loads the playbook, then forks the run's workers, each ready at once.

Started by Popen after the hosts are known, each worker paid a Python start and those imports
(~0.12 s of a core here, ~0.3 s on a slower one) while the first hosts' connections waited
for it; 8 of them competed for cores with the hosts' own starts. A run that wants no workers
(few hosts or cores, --ssh-workers 0) ends the seed unused: one process's start, on a machine
with cores to spare (it is started only where workers are likely, see `likely_wanted`).

The seed forks its children before any thread of its own starts (it has none), and hands each
child's two pipe ends to the controller over a Unix socket (SCM_RIGHTS). It is their parent: it
reaps them and tells the controller each one's exit status, then exits when all have ended.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

#: A worker's loop over its two pipes (workerproc.serve_pipes).
ServePipes = Callable[[IO[bytes], IO[bytes]], None]

#: The environment variable that passes the controller's sys.path (workerpool's _BOOT does the same).
SYS_PATH_VAR = "OPSRUNNER_WORKER_SYS_PATH"
_BOOT = (f"import os, sys; sys.path[:] = os.environ.pop({SYS_PATH_VAR!r}).split(os.pathsep); "
         "from opsrunner.connections.workerseed import serve; serve(int(sys.argv[1]))")
#: How long a discarded or finished seed may take to exit before it is killed.
SEED_EXIT_WAIT_S = 5.0
#: How often a worker's wait looks whether the seed is gone (then no one reports its end).
REPORT_POLL_S = 0.1


class ForkedWorker:
    """A worker forked by the seed: its pid, its pipes, and its end as the seed reports it.
    wait() and kill() behave as a Popen's, for workerpool.WorkerProcess."""

    def __init__(self, seed: WorkerSeed, pid: int, to_worker: IO[bytes], from_worker: IO[bytes]) -> None:
        self._seed = seed
        self.pid = pid
        self.stdin = to_worker
        self.stdout = from_worker
        # A pidfd names this process and no other: the seed reaps it, and its pid may then be reused.
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # a kernel before 5.3: the pid, alive until the seed reports its end
            self._pidfd = None

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit status (negative: the signal) as the seed reports it; None where it ended
        after the seed did (no one told its status); TimeoutExpired after `timeout`, as
        Popen.wait raises."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            code = self._seed.exit_status(self.pid, REPORT_POLL_S if left is None else min(left, REPORT_POLL_S))
            if code is not None:
                return code
            if self._seed.gone and self._ended():
                return None
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"ssh worker {self.pid}", timeout or 0.0)

    def _ended(self) -> bool:
        if self._pidfd is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return True
            return False
        return bool(select.select([self._pidfd], [], [], 0)[0])  # readable once it has exited

    def kill(self) -> None:
        if self._seed.exit_status(self.pid, 0) is not None:
            return
        with contextlib.suppress(OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def release(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class WorkerSeed:
    """The controller's side of the seed process."""

    def __init__(self) -> None:
        # Datagrams in order: each child's pid arrives alone with its two pipe ends.
        self._socket, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, **{SYS_PATH_VAR: os.pathsep.join(sys.path)})
        try:  # its own process group, as the workers it forks: a terminal's Ctrl-C is the controller's
            self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(far.fileno())], pass_fds=(far.fileno(),),
                                         stdin=subprocess.DEVNULL, env=env, process_group=0)
        finally:
            far.close()
        self._ended: dict[int, int] = {}
        self._cond = threading.Condition()
        self._forked = False
        #: The seed has ended: no more exit statuses will come.
        self.gone = False

    def fork(self, count: int) -> list[ForkedWorker]:
        """`count` workers, forked now (after the seed's imports, if they are still running).
        Raises OSError where the seed is gone; the seed is then of no more use."""
        self._forked = True
        self._socket.sendall(f"{count}\n".encode())
        workers = []
        for _ in range(count):
            message, fds, _flags, _addr = socket.recv_fds(self._socket, 64, 2)
            if len(fds) != 2 or not message:
                for fd in fds:
                    os.close(fd)
                raise OSError("the ssh workers' seed process ended before it forked them")
            workers.append(ForkedWorker(self, int(message), os.fdopen(fds[0], "wb"), os.fdopen(fds[1], "rb")))
        self._socket.sendall(b"go\n")  # the seed may reap from here: each pidfd is open
        threading.Thread(target=self._read_ends, name="ssh-worker-seed", daemon=True).start()
        return workers

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._ended, timeout)
            return self._ended.get(pid)

    def _read_ends(self) -> None:
        try:
            with self._socket.makefile("rb") as reports:
                for line in reports:
                    pid, code = (int(x) for x in line.split())
                    with self._cond:
                        self._ended[pid] = code
                        self._cond.notify_all()
        except (OSError, ValueError):  # closed under it at the run's end, or garbled: no more reports
            pass
        finally:
            self.gone = True

    def close(self) -> None:
        """End the seed: unused, at once (its imports are of no more use); after its workers,
        once it has reaped them all (WorkerPool.close stops them first)."""
        if not self._forked:
            self.proc.kill()
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(SEED_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._socket.close()


# -- the one seed of an `opsrunner play` process ---------------------------------------------
_started: WorkerSeed | None = None


def prestart() -> WorkerSeed | None:
    """Start this process's seed, once; None where it cannot start (workers are then spawned)."""
    global _started
    if _started is None:
        try:
            _started = WorkerSeed()
        except OSError:
            return None
        atexit.register(discard)
    return _started


def take() -> WorkerSeed | None:
    """The started seed, for the run's worker pool (once); None where none was started."""
    global _started
    seed, _started = _started, None
    return seed


def discard() -> None:
    """End the seed if no run took it (a run that wants no workers, bad input, --help)."""
    seed = take()
    if seed is not None:
        seed.close()


def likely_wanted(argv: Sequence[str], env: dict[str, str] | os._Environ[str], cores: int, min_cores: int) -> bool:
    """Whether `opsrunner ARGV` is likely to run ssh workers, from its words alone, before
    anything is parsed: a `play` with --ssh-workers (or $OPSRUNNER_SSH_WORKERS) above 0, or
    without either on a machine of `min_cores` or more. A wrong guess costs a spare process."""
    if not argv or argv[0] != "play" or any(a in ("--list-hosts", "--list-tasks", "--syntax-check", "-h", "--help")
                                            for a in argv):
        return False
    given = None
    for i, word in enumerate(argv):
        if word == "--ssh-workers" and i + 1 < len(argv):
            given = argv[i + 1]
        elif word.startswith("--ssh-workers="):
            given = word.partition("=")[2]
    if given is None:
        given = env.get("OPSRUNNER_SSH_WORKERS", "").strip() or None
    if given is None:
        return cores >= min_cores
    return given.isdigit() and int(given) > 0


# -- the seed process -------------------------------------------------------------------------
def serve(control_fd: int) -> None:
    """The seed: import a worker's code, fork the workers asked for, reap them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the workers (workerproc.py): the controller stops them
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.dup2(2, 1)  # a stray print goes to stderr, as in a worker, not into the run's output
    from opsrunner.connections import workerproc

    control = socket.socket(fileno=control_fd)
    count = control.recv(64).strip()
    if not count.isdigit():  # discarded unused: the controller shut its end
        os._exit(0)
    children = [_fork_one(control, workerproc.serve_pipes) for _ in range(int(count))]
    control.recv(64)  # "go": the controller holds a pidfd of each; reaping may free their pids
    for _ in children:
        pid, status = os.wait()
        with contextlib.suppress(OSError):
            control.sendall(f"{pid} {os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def _fork_one(control: socket.socket, serve_pipes: ServePipes) -> int:
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: its two pipe ends, nothing else of the seed's
        code = 1
        try:
            control.close()
            os.close(to_worker_w)
            os.close(from_worker_r)
            serve_pipes(os.fdopen(to_worker_r, "rb"), os.fdopen(from_worker_w, "wb"))
            code = 0
        finally:
            os._exit(code)
    os.close(to_worker_r)
    os.close(from_worker_w)
    socket.send_fds(control, [str(pid).encode()], [to_worker_w, from_worker_r])
    os.close(to_worker_w)
    os.close(from_worker_r)
    return pid
