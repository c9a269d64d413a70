"""Held channels: a command on a target that runs for exactly as long as the controller
keeps its channel open, and no longer.

When the controller closes the channel, dies, or loses the connection, the command's stdin
reaches EOF and it exits. A heartbeat thread writes a newline every few seconds so that the
remote side can also give up on a half-open connection that never delivers EOF. The channel
knows nothing of what the command does; the job lock's keeper is one such command
(locks/job_lock.py starts it through Connection.hold).
"""

from __future__ import annotations

import abc
import contextlib
import os
import select
import subprocess
import threading
import time
from typing import Any


class HeldCommand(abc.ABC):
    """The controller's end of a held channel: read the command's lines, write to its stdin,
    beat to keep its lease, close it (which ends the command)."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._buffer = b""
        self._closed = threading.Event()
        self._send_lock = threading.Lock()
        self._beat: threading.Thread | None = None

    @abc.abstractmethod
    def _recv(self, timeout: float) -> bytes | None:
        """Some bytes of stdout; b"" at EOF; None when nothing came within timeout."""

    @abc.abstractmethod
    def _send(self, data: bytes) -> None:
        """Write to the command's stdin (raises OSError when that is gone)."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Close the channel (the remote side sees EOF)."""

    @abc.abstractmethod
    def stderr(self) -> str:
        """Whatever the command wrote to stderr so far (for error messages)."""

    def readline(self, timeout: float) -> bytes | None:
        """The next stdout line (without the newline); None at EOF or after timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            chunk = self._recv(min(left, 0.5))
            if chunk == b"":
                return None
            if chunk:
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def send(self, data: bytes) -> bool:
        with self._send_lock:
            if self._closed.is_set():
                return False
            try:
                self._send(data)
            except (OSError, EOFError):
                return False
            return True

    def keepalive(self, interval: float) -> None:
        """Write a newline every `interval` seconds until closed (the remote lease's heartbeat)."""

        def beat() -> None:
            while not self._closed.wait(interval):
                if not self.send(b"\n"):
                    return

        self._beat = threading.Thread(target=beat, name="held-keepalive", daemon=True)
        self._beat.start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        with self._send_lock:
            self._closed.set()
            with contextlib.suppress(Exception):
                self._close()


class LocalHeld(HeldCommand):
    def __init__(self, command: str, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(command)
        self.proc = proc
        self._err = b""

    def _recv(self, timeout: float) -> bytes | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return os.read(self.proc.stdout.fileno(), 1 << 16) if ready else None

    def _send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        if self.proc.stderr is not None and self.proc.poll() is not None:
            with contextlib.suppress(OSError, ValueError):
                self._err += self.proc.stderr.read()
        return self._err.decode("utf-8", "replace")


class ChannelHeld(HeldCommand):
    """Over a paramiko channel (kept untyped here so that paramiko is imported only by ssh.py)."""

    def __init__(self, command: str, chan: Any) -> None:
        super().__init__(command)
        self.chan = chan
        self._err = b""

    def _recv(self, timeout: float) -> bytes | None:
        select.select([self.chan], [], [], timeout)
        while self.chan.recv_stderr_ready():
            self._err += self.chan.recv_stderr(1 << 16)
        if self.chan.recv_ready():
            data: bytes = self.chan.recv(1 << 16)
            return data
        if self.chan.closed or (self.chan.eof_received and self.chan.exit_status_ready()):
            return b""
        return None

    def _send(self, data: bytes) -> None:
        self.chan.sendall(data)

    def _close(self) -> None:
        self.chan.close()

    def stderr(self) -> str:
        while self.chan.recv_stderr_ready():
            self._err += self.chan.recv_stderr(1 << 16)
        return self._err.decode("utf-8", "replace")
