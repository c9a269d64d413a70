# opsrunner-agent part 2: bounded reads of regular files. A FIFO, device or socket where a
# regular file is expected is refused (opening one could block forever, reading /dev/zero
# or /dev/full never ends); every read stops at a documented size. A file that is there but
# cannot be used (refused, larger than its limit, unreadable, not the JSON expected) raises
# Unreadable where the caller must tell it from an absent one (load_json, read_whole).
from __future__ import annotations

import errno
import os
import stat

from .wire import json_loads

#: The most of a log that verify searches with log_regex / log_not_regex: its last 4 MiB.
REGEX_WINDOW = 4 << 20
#: The most of a log that a tail (diagnosis, status, `opsrunner logs`) reads: its last 256 KiB.
TAIL_WINDOW = 256 << 10
#: Pidfiles: 64 KiB at most.
SMALL_LIMIT = 64 << 10
#: JSON records beside a job (launch record, exit record, last good run, a rollback's prior
#: run) and release verdicts: 16 MiB at most. A launch record holds the job's argv and
#: environment, up to 2 MiB on Linux and several times that as escaped JSON.
RECORD_LIMIT = 16 << 20

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class Unreadable(ValueError):
    """A file that is there but cannot be used: not a regular file, larger than the most that
    is read of it, unreadable, or not the JSON expected. The message names it and says why
    ("launch record /x/train.launch.json is not valid JSON (...)"); `path` is the file and
    `why` the reason alone ("not valid JSON (...)"), for a caller that words it its own way."""

    def __init__(self, message: str, path: str | None = None, why: str | None = None) -> None:
        super().__init__(message)
        self.path, self.why = path, why or message


def unreadable(what: str, path: str, why: str) -> Unreadable:
    """Unreadable("WHAT PATH is WHY") for a file that is there but cannot be used."""
    return Unreadable(f"{what} {path} is {why}", path, why)


class NotRegular(Unreadable):
    """A path that must be a regular file is something else; the message says what."""


def file_kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def not_regular_msg(what: str, path: str, mode: int) -> str:
    return f"{what} {path} is {file_kind(mode)}, not a regular file: refusing to use it"


def check_regular(path: str, what: str) -> str | None:
    """None when `path` is absent or a regular file, else why it cannot be used (one line)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        return f"{what} {path}: {exc.strerror} (errno {exc.errno})"
    if stat.S_ISREG(st.st_mode):
        return None
    return not_regular_msg(what, path, st.st_mode)


def open_regular(path: str, what: str) -> tuple[int, os.stat_result]:
    """A read-only fd on a regular file; O_NONBLOCK so a FIFO never blocks the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegular(not_regular_msg(what, path, st.st_mode), path,
                         f"{file_kind(st.st_mode)}, not a regular file: refusing to use it")
    return fd, st


def _read_range(fd: int, start: int, limit: int) -> bytes:
    os.lseek(fd, start, 0)
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_small(path: str, what: str) -> bytes | None:
    """The whole of a small regular file (up to SMALL_LIMIT), or None when it is absent."""
    try:
        fd, _ = open_regular(path, what)
    except OSError:
        return None
    try:
        return _read_range(fd, 0, SMALL_LIMIT)
    finally:
        os.close(fd)


def read_whole(path: str, what: str, limit: int) -> bytes | None:
    """The whole of a regular file of at most `limit` bytes, or None when it is absent.
    Unreadable when it is there but is no regular file, is larger, or cannot be read."""
    try:
        fd, st = open_regular(path, what)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise _cannot_read(what, path, exc) from None
    try:
        if st.st_size > limit:
            raise unreadable(what, path, f"{st.st_size} bytes, more than the {limit} read at most")
        data = _read_range(fd, 0, limit + 1)
    except OSError as exc:
        raise _cannot_read(what, path, exc) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while it was read
        raise unreadable(what, path, f"more than the {limit} bytes read at most")
    return data


def _cannot_read(what: str, path: str, exc: OSError) -> Unreadable:
    why = f"{exc.strerror} (errno {exc.errno})"
    return Unreadable(f"{what} {path} cannot be read: {why}", path, why)


def read_window(path: str, offset: int = 0, limit: int = TAIL_WINDOW,
                what: str = "log") -> tuple[bytes, int] | tuple[None, None]:
    """(bytes from max(offset, size - limit) to the end, size); (None, None) when absent."""
    try:
        fd, st = open_regular(path, what)
    except OSError:
        return None, None
    try:
        size = st.st_size
        start = offset if 0 <= offset <= size else 0
        return _read_range(fd, max(start, size - limit), limit), size
    finally:
        os.close(fd)


def tail_lines(path: str, offset: int = 0, lines: int = 20) -> str:
    data, _ = read_window(path, offset, TAIL_WINDOW)
    if not data:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def load_json(path: str, what: str, limit: int = RECORD_LIMIT) -> dict[str, object] | None:
    """A JSON object read whole from a regular file of at most `limit` bytes, or None when the
    file is absent; Unreadable, saying why, when it is there but cannot be used."""
    data = read_whole(path, what, limit)
    if data is None:
        return None
    if not data.strip():
        raise unreadable(what, path, "empty")
    try:
        value = json_loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is one too
        raise unreadable(what, path, f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise unreadable(what, path, "not a JSON object")
    return value


def read_json(path: str, what: str, limit: int = RECORD_LIMIT) -> dict[str, object] | None:
    """A JSON record, or None when it is absent or cannot be used (NotRegular is still
    raised: a FIFO or device is refused, never read). Only for records whose loss is safe
    to treat as their absence; load_json tells the two apart."""
    try:
        return load_json(path, what, limit)
    except NotRegular:
        raise
    except Unreadable:
        return None


def file_size(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size
