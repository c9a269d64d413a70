"""Helpers shared by transports: stdin feeding and the watchdog's timeout marker."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import IO

TIMEOUT_MARKER = b"\n[opsrunner] timed out\n"
CHUNK = 1 << 16


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
