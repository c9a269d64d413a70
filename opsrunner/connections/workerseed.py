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
import traceback
from collections.abc import Callable, Sequence
from typing import IO

#: A worker's loop over its two pipes (workerproc.serve_pipes).
ServePipes = Callable[[IO[bytes], IO[bytes]], None]

#: The environment variable that passes the controller's sys.path to a worker or the seed.
SYS_PATH_VAR = "OPSRUNNER_WORKER_SYS_PATH"


def boot(code: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment of a Python that runs `code` with this process's sys.path, passed in
    a variable it takes out of its environment at once: PYTHONPATH would reach every program it
    starts (a ProxyCommand), and `-m` would put the playbook's directory first on its path."""
    prelude = f"import os, sys; sys.path[:] = os.environ.pop({SYS_PATH_VAR!r}).split(os.pathsep); "
    return [sys.executable, "-c", prelude + code], dict(os.environ, **{SYS_PATH_VAR: os.pathsep.join(sys.path)})
#: How long a discarded or finished seed may take to exit before it is killed.
SEED_EXIT_WAIT_S = 5.0
#: How often a worker's wait looks whether the seed is gone (then no one reports its end).
REPORT_POLL_S = 0.1
#: How long the run waits for the seed to fork its workers (its imports first) before it
#: spawns them instead: a seed stuck in its imports (a hung NFS, a stopped process) must not
#: hold the run.
FORK_WAIT_S = 30.0


class ForkedWorker:
    """A worker forked by the seed: its pid and pidfd, its pipes, and its end as the seed
    reports it. wait() and kill() behave as a Popen's, for workerpool.WorkerProcess."""

    def __init__(self, seed: WorkerSeed, pid: int, pidfd: int, to_worker: IO[bytes], from_worker: IO[bytes]) -> None:
        self._seed = seed
        self.pid = pid
        # The pidfd names this process and no other: the seed reaps it, and its pid may then be reused.
        self._pidfd: int | None = pidfd
        self._pidfd_lock = threading.Lock()  # the reader thread's wait and stop()'s release
        self.stdin = to_worker
        self.stdout = from_worker

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
        with self._pidfd_lock:
            if self._pidfd is None:  # released: it was waited for already
                return True
            poller = select.poll()
            poller.register(self._pidfd, select.POLLIN)
            return bool(poller.poll(0))  # readable once it has exited

    def kill(self) -> None:
        with self._pidfd_lock, contextlib.suppress(OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def release(self) -> None:
        """Close its pidfd (after its end was waited for)."""
        with self._pidfd_lock:
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None

    def discard(self) -> None:
        """Let go of a worker the run will not use: its pipes (it exits at their end), its pidfd."""
        for end in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                end.close()
        self.release()


class WorkerSeed:
    """The controller's side of the seed process."""

    def __init__(self) -> None:
        # Datagrams in order: each child's pid arrives alone with its two pipe ends.
        self._socket, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv, env = boot("from opsrunner.connections.workerseed import serve; serve(int(sys.argv[1]))")
        try:  # its own process group, as the workers it forks: a terminal's Ctrl-C is the controller's
            self.proc = subprocess.Popen([*argv, str(far.fileno())], pass_fds=(far.fileno(),),
                                         stdin=subprocess.DEVNULL, env=env, process_group=0)
        except BaseException:
            self._socket.close()
            raise
        finally:
            far.close()
        self._ended: dict[int, int] = {}
        self._cond = threading.Condition()
        self._forked = False
        #: The seed has ended: no more exit statuses will come.
        self.gone = False

    def fork(self, count: int) -> list[ForkedWorker]:
        """`count` workers, forked now (after the seed's imports, if they are still running).
        Raises OSError where the seed is gone, does not answer within FORK_WAIT_S, or a worker
        cannot be named by a pidfd; the seed is then of no more use (close() kills it)."""
        workers: list[ForkedWorker] = []
        try:
            self._socket.settimeout(FORK_WAIT_S)
            self._socket.sendall(f"{count}\n".encode())
            for _ in range(count):
                workers.append(self._receive_one())
            self._socket.sendall(b"go\n")  # the seed may reap from here: each pidfd is open
            self._socket.settimeout(None)
        except BaseException:
            for worker in workers:
                worker.discard()
            raise
        self._forked = True
        threading.Thread(target=self._read_ends, name="ssh-worker-seed", daemon=True).start()
        return workers

    def _receive_one(self) -> ForkedWorker:
        message, fds, _flags, _addr = socket.recv_fds(self._socket, 64, 2)  # (it passes no flags on)
        for fd in fds:  # close-on-exec: a program this process starts must not hold a worker's stdin open
            os.set_inheritable(fd, False)
        files = [os.fdopen(fd, mode) for fd, mode in zip(fds, ("wb", "rb"), strict=False)]
        try:
            if len(fds) != 2 or not message:
                raise OSError("the ssh workers' seed process ended before it forked them")
            pid = int(message)
            pidfd = os.pidfd_open(pid)
        except BaseException:  # AttributeError: no pidfds here (not Linux); ValueError: a garbled pid
            for file in files:
                file.close()
            raise OSError("the ssh workers' seed gave no worker this process can name by a pidfd") from None
        return ForkedWorker(self, pid, pidfd, files[0], files[1])

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
        """End the seed: unused or failed, at once; after its workers, once it has reaped them
        all (WorkerPool.close stops them first)."""
        if not self._forked:
            self.proc.kill()
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
        try:
            self.proc.wait(SEED_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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
    if not argv or argv[0] != "play" or any(a in ("--list-hosts", "--list-tasks", "--list-tags", "--syntax-check", "-h",
                                                      "--help")
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
        except BaseException:  # told on stderr, as a spawned worker's traceback is
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(to_worker_r)
    os.close(from_worker_w)
    socket.send_fds(control, [str(pid).encode()], [to_worker_w, from_worker_r])
    os.close(to_worker_w)
    os.close(from_worker_r)
    return pid
