"""The CLI's output streams: output that cannot be delivered never stops the command.

`opsrunner play ... | head -1` closes the pipe after one line. Python ignores SIGPIPE, so
every later write raises BrokenPipeError; unguarded, that ended the run mid-play (a
traceback, exit 250, the history row left open). Through this stream, output stops
quietly at the first broken write and the command goes on to its end and its exit code.
So it does where the output's file cannot take more (its disk full, a quota, a file-size
limit, an I/O error): a run stopped there could have stopped the old job and not started
the new one. That loss is not quiet: `lost` says from when (to when, where a later write
got through: a disk may fill for a moment) and why, for a warning at the end and the history.

A stream with a descriptor is written with os.write until all of it is written: a full disk
takes part of a write, and CPython's buffered file counted that as success and dropped the
rest; only a later write raised, and at a command's end none came (a recap cut, silently).
A non-blocking descriptor (OpenSSH sets O_NONBLOCK on its stdio where no tty) whose reader is
slow raises EAGAIN on a full pipe: the write waits for room (WRITE_WAIT_S at most), and what
still finds none is lost as a full disk's output is.
"""

from __future__ import annotations

import errno
import os
import select
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

#: The reader went away: nobody is left to tell.
_READER_GONE = (errno.EPIPE, errno.ECONNRESET)
#: The output's file cannot take more: told at the end (on the other stream, the history).
_UNDELIVERABLE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EAGAIN)
#: How long one write to a non-blocking output waits for its reader to make room.
WRITE_WAIT_S = 5.0
#: After an undeliverable write, how long later writes are dropped before one is tried again:
#: a disk freed meanwhile takes output again, and a full one costs a failed write a second.
RETRY_S = 1.0
#: Why a terminal's output stopped at SIGHUP (interrupts.hangup_drops_output).
HUNG_UP = "the terminal went away"


@dataclass
class _Gap:
    """Output lost from `start` to `end` (None: to the command's end), and why."""

    start: float
    why: str
    end: float | None = None


class QuietWhenClosed:
    """A text stream that drops what it cannot deliver, and says from when (`lost`)."""

    def __init__(self, stream: IO[str], closes: bool = False) -> None:
        self._stream = stream
        self._fd = _descriptor(stream)
        self._encoding = (getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict")
        self._closes = closes  # close() closes the stream too: a file the command opened
        self._began = time.time()
        self._tty = _is_tty(stream)
        #: No more output ever: its reader went away (a closed pipe, a terminal hung up).
        self.reader_gone = False
        self._gaps: list[_Gap] = []
        self._retry_at = 0.0
        #: When a SIGHUP came while this stream is no terminal (it went on as before).
        self.hangup_ignored_at: float | None = None
        # Host threads write too: one write's chunks (os.write takes at most PIPE_BUF at once
        # from a pipe's writer) must not interleave with another's, nor the gaps' bookkeeping.
        self._lock = threading.RLock()

    # -- what was lost --------------------------------------------------------------------------
    @property
    def lost(self) -> str | None:
        """From when (to when) output was lost, and why: `from 12:01:02 on: No space left on
        device`; None when all of it was delivered (or only a reader that went away missed it)."""
        with self._lock:
            gaps = list(self._gaps)
        if not gaps:
            return None
        shown = gaps if len(gaps) <= 3 else [gaps[0], gaps[-1]]
        parts = [f"{self._span(g)}: {g.why}" for g in shown]
        if len(shown) < len(gaps):
            parts.insert(1, f"{len(gaps) - 2} more times")
        return ", ".join(parts)

    @property
    def lost_to_the_end(self) -> bool:
        return bool(self._gaps) and self._gaps[-1].end is None

    def _span(self, gap: _Gap) -> str:
        return f"from {self._when(gap.start)} " + ("on" if gap.end is None else f"to {self._when(gap.end)}")

    def _when(self, ts: float) -> str:
        """HH:MM:SS as the history's own times; with the date where the command crossed midnight."""
        same_day = time.localtime(ts)[:3] == time.localtime(self._began)[:3]
        return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", time.localtime(ts))

    def hang_up(self) -> None:
        """SIGHUP: a terminal's reader went away. Its output is dropped from now on, told as
        lost; a file or a pipe still takes it."""
        with self._lock:  # reentrant: the handler may run in the main thread's own write
            if not self._tty:  # `systemctl kill -s HUP`: nothing to drop, but never silent
                self.hangup_ignored_at = self.hangup_ignored_at or time.time()
            elif not self.reader_gone:
                self._close_gap()
                self._gaps.append(_Gap(time.time(), HUNG_UP))
                self._to_devnull()

    # -- writing --------------------------------------------------------------------------------
    def write(self, text: str) -> int:
        with self._lock:
            return self._write(text)

    def _write(self, text: str) -> int:
        if self.reader_gone or (self._gaps and self._gaps[-1].end is None and time.monotonic() < self._retry_at):
            return len(text)
        try:
            if self._fd is None:
                self._stream.write(self._encodable(text))
            else:
                self._stream.flush()  # what others wrote to it first (usually nothing)
                _write_all(self._fd, self._encoded(text))
        except OSError as exc:
            self._failed(exc)
        else:
            self._close_gap()
        return len(text)

    def _encoded(self, text: str) -> bytes:
        """`text` in the stream's encoding; what it cannot hold (a lone surrogate, a character
        beyond an ASCII locale) as a backslash escape: output never stops a run."""
        try:
            return text.encode(*self._encoding)
        except UnicodeEncodeError:
            return text.encode(self._encoding[0], "backslashreplace")

    def _encodable(self, text: str) -> str:
        """`text` as a stream with no descriptor takes it (a StringIO takes any str)."""
        encoding: str = getattr(self._stream, "encoding", None) or ""
        try:
            if encoding:
                text.encode(encoding)
        except UnicodeEncodeError:
            return text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            pass
        return text

    def flush(self) -> None:
        with self._lock:
            if self.reader_gone:
                return
            try:
                self._stream.flush()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in _READER_GONE + _UNDELIVERABLE:
            raise exc
        if exc.errno in _UNDELIVERABLE:  # may pass: tried again a second later
            if not self._gaps or self._gaps[-1].end is not None:
                self._gaps.append(_Gap(time.time(), exc.strerror or str(exc)))
            self._retry_at = time.monotonic() + RETRY_S
            return
        self.reader_gone = True
        self._to_devnull()

    def _close_gap(self) -> None:
        if self._gaps and self._gaps[-1].end is None and not self.reader_gone:
            self._gaps[-1].end = time.time()

    def _to_devnull(self) -> None:
        # What is still buffered would fail again at the interpreter's exit ("Exception
        # ignored ... BrokenPipeError"): the descriptor goes to /dev/null instead.
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def isatty(self) -> bool:
        return not self.reader_gone and self._stream.isatty()

    def close(self) -> None:
        self.flush()
        if self._closes:
            try:
                self._stream.close()
            except OSError as exc:
                self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _descriptor(stream: IO[str]) -> int | None:
    """The descriptor under a text file (sys.stdout, a file opened for --json-events), to write
    to directly; None for anything else (a StringIO, a caller's own stream)."""
    if getattr(stream, "buffer", None) is None or not getattr(stream, "encoding", None):
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def _write_all(fd: int, data: bytes) -> None:
    """All of `data`, or the OSError that stopped it: a short write (a disk that filled
    partway) is followed by another, which raises (ENOSPC, EFBIG) where nothing more fits."""
    view, deadline = memoryview(data), None
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # O_NONBLOCK and a full pipe: its reader is slow, not gone
            deadline = deadline or time.monotonic() + WRITE_WAIT_S
            _wait_writable(fd, deadline)


def _wait_writable(fd: int, deadline: float) -> None:
    """Until `fd` takes output again (or reports an error, which the next write raises)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(left * 1000):
        raise OSError(errno.EAGAIN, f"its reader took none of it for {WRITE_WAIT_S:g} s")


def lost_notes(streams: list[tuple[str, Any]]) -> list[str]:
    """What a run's record says of its output that could not be written: a note per stream
    (`streams`: its name, as `the run's NAME`, and the stream) that lost some."""
    notes = [f"the run's {name} could not be written {lost}; the run went on to its end"
             for name, stream in streams if (lost := getattr(stream, "lost", None))]
    ignored = [at for _, stream in streams if (at := getattr(stream, "hangup_ignored_at", None))]
    if ignored and not any(HUNG_UP in note for note in notes):
        notes.append(f"SIGHUP received at {time.strftime('%H:%M:%S', time.localtime(min(ignored)))} and ignored "
                     "(no terminal to drop output to): the run went on to its end")
    return notes
