"""The local connection: argv run by subprocess on this machine (through the wrapper chain)."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from opsrunner.connections.base import Connection
from opsrunner.connections.streams import (
    AGENT_EXIT_WAIT_S,
    StderrTail,
    Stream,
    feed_stdin,
    split_warnings,
    strip_timeout_marker,
)
from opsrunner.errors import ModuleFailure
from opsrunner.remote.watchdog import kill_descendants
from opsrunner.results import CommandResult

#: Extra seconds the controller waits past a task timeout before it kills on its own
#: (the watchdog on the target normally ends the command first).
BACKUP_GRACE_S = 5.0


def job_environment(environ: Mapping[str, str] | None = None, prefix: str | None = None,
                    base_prefix: str | None = None) -> dict[str, str] | None:
    """The environment of what a local host runs (commands, the agent and the jobs it launches):
    the controller's, less opsrunner's own virtualenv when opsrunner runs in one (`source
    .venv/bin/activate`): its VIRTUAL_ENV (and VIRTUAL_ENV_PROMPT), its bin on PATH and a
    PYTHONHOME naming it. So a job's `python3` is the one its user would get, whoever runs
    opsrunner (a shell with the venv, cron, a timer), as on an ssh host. None: inherited as is."""
    environ = os.environ if environ is None else environ
    prefix, base = prefix or sys.prefix, base_prefix or sys.base_prefix
    if os.path.realpath(prefix) == os.path.realpath(base):
        return None

    def ours(path: str | None) -> bool:
        return bool(path) and os.path.realpath(str(path)) == os.path.realpath(prefix)

    env = dict(environ)
    if ours(env.get("VIRTUAL_ENV")):
        env.pop("VIRTUAL_ENV")
        env.pop("VIRTUAL_ENV_PROMPT", None)
    if ours(env.get("PYTHONHOME")):
        env.pop("PYTHONHOME")
    if "PATH" in env:
        venv_bin = os.path.join(prefix, "bin")
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if not p or os.path.realpath(p) != os.path.realpath(venv_bin))
    return env


class LocalConnection(Connection):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._env = job_environment()

    def open(self) -> None:
        return None

    def close(self) -> None:
        self._close_agent()
        with self._lock:
            running = list(self._running)
        for proc in running:
            _kill_tree(proc.pid)

    def _execute(self, argv: Sequence[str], stdin: bytes | IO[bytes] | None,
                 timeout: float | None) -> CommandResult:
        command = shlex.join(argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C on the controller must not hit it first
                env=self._env,
            )
        except OSError as exc:
            return CommandResult(command, 127, b"", f"{argv[0]}: {exc.strerror}\n".encode(),
                                 time.monotonic() - start)
        with self._lock:
            self._running.add(proc)
        try:
            return self._collect(proc, command, stdin, timeout, start)
        finally:
            with self._lock:
                self._running.discard(proc)

    def _spawn(self, argv: Sequence[str]) -> Stream:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True, bufsize=0, env=self._env)
        except OSError as exc:
            raise ModuleFailure(f"cannot start {argv[0]}: {exc.strerror}") from None
        return _ProcessStream(proc)

    def _collect(self, proc: subprocess.Popen[bytes], command: str, stdin: bytes | IO[bytes] | None,
                 timeout: float | None, start: float) -> CommandResult:
        feeder = None
        if stdin is not None and proc.stdin is not None:
            pipe, proc.stdin = proc.stdin, None  # fed by our thread; communicate() reads only
            feeder = threading.Thread(target=feed_stdin, args=(pipe.write, pipe.close, stdin),
                                      daemon=True)
            feeder.start()
        backup = None if timeout is None else timeout + BACKUP_GRACE_S
        try:
            out, err = proc.communicate(timeout=backup)
            forced = False
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            out, err = proc.communicate()
            forced = True
        if feeder:
            feeder.join(timeout=1)
        err, marked = strip_timeout_marker(err)
        err, warnings = split_warnings(err)
        timed_out = forced or (marked and proc.returncode == 124)
        return CommandResult(command, proc.returncode, out, err, time.monotonic() - start, timed_out,
                             warnings)


def _kill_tree(root: int) -> None:
    """SIGKILL a command's whole tree: below a watchdog (a child subreaper) a child that left
    its session is still a descendant, and one left alive would hold the command's output
    open (the run would wait on it for ever); then the command's own process group."""
    kill_descendants(root, 10)  # again while a fork races the kill
    with contextlib.suppress(OSError):
        os.killpg(root, signal.SIGKILL)


class _ProcessStream(Stream):
    """A local child process as a Stream; its stderr is drained (and its end kept) by a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.tail = StderrTail()
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._in, self._out, err = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr
        threading.Thread(target=self._drain, args=(err,), daemon=True).start()

    def _drain(self, err: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := err.read(4096):
                self.tail.add(chunk)

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._in, view):]

    def recv(self, size: int, timeout: float | None) -> bytes:
        ready, _, _ = select.select([self._out], [], [], timeout)
        if not ready:
            raise TimeoutError
        return os.read(self._out, size)

    def close(self, wait_exit: bool = False) -> bool:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # EOF: the agent stops its work and exits
        exited = True
        try:
            self.proc.wait(timeout=AGENT_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            exited = False
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return exited

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_text(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rc = self.proc.wait(timeout=1)
        how = "still running" if rc is None else (f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
        tail = self.tail.text()
        return f"{how}: {tail}" if tail else how
