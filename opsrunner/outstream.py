"""The CLI's output streams: a reader that goes away never stops the command.

`opsrunner play ... | head -1` closes the pipe after one line. Python ignores SIGPIPE, so
every later write raises BrokenPipeError; unguarded, that ended the run mid-play (a
traceback, exit 250, the history row left open). Through this stream, output stops
quietly at the first broken write and the command goes on to its end and its exit code.
"""

from __future__ import annotations

import errno
import os
from typing import IO, Any


class QuietWhenClosed:
    """A text stream that drops what it cannot deliver once its reader has gone."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.reader_gone = False

    def _lost(self, exc: OSError) -> None:
        if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPIPE, errno.ECONNRESET):
            raise exc
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
