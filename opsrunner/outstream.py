"""The CLI's output streams: output that cannot be delivered never stops the command.

`opsrunner play ... | head -1` closes the pipe after one line. Python ignores SIGPIPE, so
every later write raises BrokenPipeError; unguarded, that ended the run mid-play (a
traceback, exit 250, the history row left open). Through this stream, output stops
quietly at the first broken write and the command goes on to its end and its exit code.
So it does where the output's file cannot take more (its disk full, a quota, a file-size
limit, an I/O error): a run stopped there could have stopped the old job and not started
the new one. That loss is not quiet: `lost` says from when and why, for a warning at the end.
"""

from __future__ import annotations

import errno
import os
import time
from typing import IO, Any

#: The reader went away: nobody is left to tell.
_READER_GONE = (errno.EPIPE, errno.ECONNRESET)
#: The output's file cannot take more: told at the end (on the other stream, the history).
_UNDELIVERABLE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


class QuietWhenClosed:
    """A text stream that drops what it cannot deliver once its reader has gone."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.reader_gone = False
        #: Why output stopped where it could not be written, with when: "from 12:01:02 on: ...".
        self.lost: str | None = None

    def _lost(self, exc: OSError) -> None:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in _READER_GONE + _UNDELIVERABLE:
            raise exc
        if exc.errno in _UNDELIVERABLE:
            self.lost = f"from {time.strftime('%H:%M:%S')} on: {exc.strerror or exc}"
        self.reader_gone = True
        # What is still buffered would fail again at the interpreter's exit ("Exception
        # ignored ... BrokenPipeError"): the descriptor goes to /dev/null instead.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if self.reader_gone:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._lost(exc)
            return len(text)

    def flush(self) -> None:
        if self.reader_gone:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            self._lost(exc)

    def isatty(self) -> bool:
        return not self.reader_gone and self._stream.isatty()

    def close(self) -> None:
        self.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
