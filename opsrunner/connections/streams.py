"""Helpers shared by transports: stdin feeding and the watchdog's timeout marker."""

from __future__ import annotations

import abc
import contextlib
import io
import re
from collections.abc import Callable
from typing import IO, cast

TIMEOUT_MARKER = b"\n[opsrunner] timed out\n"
_WARNING = re.compile(rb"\n\[opsrunner\] warning: ([^\n]*)\n")
CHUNK = 1 << 16
#: How long closing an agent's stream waits for it to exit after EOF on its stdin (it exits
#: at once; a chain that does not is then stopped by closing its channel or killing it).
AGENT_EXIT_WAIT_S = 2.0


def feed_stdin(write: Callable[[bytes], object], close: Callable[[], object],
               data: bytes | IO[bytes]) -> None:
    """Copy bytes or a binary stream to a command's stdin in chunks, then close it."""
    with contextlib.suppress(OSError, EOFError):
        if isinstance(data, bytes):
            for i in range(0, len(data), CHUNK):
                write(data[i:i + CHUNK])
        else:
            while chunk := data.read(CHUNK):
                write(chunk)
    with contextlib.suppress(OSError, EOFError):
        close()


def strip_timeout_marker(stderr: bytes) -> tuple[bytes, bool]:
    if stderr.endswith(TIMEOUT_MARKER):
        return stderr[: -len(TIMEOUT_MARKER)], True
    idx = stderr.rfind(TIMEOUT_MARKER)
    if idx >= 0:
        return stderr[:idx] + stderr[idx + len(TIMEOUT_MARKER):], True
    return stderr, False


class Stream(abc.ABC):
    """A long-lived process on the host (the agent): its stdin and stdout as a byte pipe."""

    @abc.abstractmethod
    def send(self, data: bytes) -> None:
        """Write all of data to the process's stdin; raises OSError/EOFError if it is gone."""

    @abc.abstractmethod
    def recv(self, size: int, timeout: float | None) -> bytes:
        """Up to size bytes of stdout; b"" at EOF; raises TimeoutError after timeout seconds."""

    @abc.abstractmethod
    def close(self, wait_exit: bool = False) -> bool:
        """Close stdin (the process ends on EOF), then make sure it is gone; with `wait_exit`
        (the run's orderly end) first wait up to AGENT_EXIT_WAIT_S for it to exit by itself.
        True when it was seen to exit by itself (the chain around it too)."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """False once the process is known to have ended (its output closed, or it exited)."""

    @abc.abstractmethod
    def exit_text(self) -> str:
        """How the process ended, with the end of its stderr, for error messages."""


class StderrTail:
    """The last few KB of a process's stderr (bounded: a chatty agent cannot grow memory)."""

    LIMIT = 4096

    def __init__(self) -> None:
        self.data = b""

    def add(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-self.LIMIT:]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace").strip()


class _Prefixed(io.RawIOBase):
    """A header followed by a stream, read as one stream (so payloads are never copied whole)."""

    def __init__(self, header: bytes, stream: IO[bytes]) -> None:
        self._header = header
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._header:
            chunk, self._header = self._header, b""
            return chunk
        return self._stream.read(size)


def prefixed(header: bytes, data: bytes | IO[bytes] | None) -> bytes | IO[bytes]:
    """`header` then `data` as one stdin."""
    if data is None:
        return header
    if isinstance(data, bytes):
        return header + data
    return cast(IO[bytes], _Prefixed(header, data))


def split_warnings(stderr: bytes) -> tuple[bytes, tuple[str, ...]]:
    """The watchdog's warning lines, taken out of a command's stderr."""
    found = tuple(m.decode("utf-8", "replace") for m in _WARNING.findall(stderr))
    return (_WARNING.sub(b"", stderr), found) if found else (stderr, ())
