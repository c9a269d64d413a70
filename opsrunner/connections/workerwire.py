"""The messages between the controller and its ssh worker processes (workerpool.py,
workerproc.py): length-prefixed pickles over the worker's stdin and stdout pipes.

Both ends are this controller's own processes, started together and never listening
elsewhere: pickle carries the connection specs, results and exceptions as they are.
"""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

from opsrunner.connections.startslots import StartsClosed
from opsrunner.errors import ConnectionFailed

_HEADER = struct.Struct("!I")

#: The exceptions a worker's request may end with, rebuilt by name in the controller (anything
#: else arrives as ConnectionFailed with its text: a worker's failure is the host's connection's).
_KNOWN: dict[str, type[BaseException]] = {
    cls.__name__: cls for cls in (ConnectionFailed, StartsClosed, TimeoutError, EOFError, OSError, ValueError)
}


def write_message(out: IO[bytes], message: tuple[Any, ...]) -> None:
    """One message; the caller holds the pipe's write lock."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(body)) + body)
    out.flush()


def read_message(source: IO[bytes]) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the pipe (the other process is gone)."""
    header = source.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = source.read(size)
    if len(body) < size:
        return None
    message: tuple[Any, ...] = pickle.loads(body)
    return message


def exception_fields(exc: BaseException) -> tuple[str, str]:
    return type(exc).__name__, str(exc)


def rebuild_exception(name: str, text: str) -> BaseException:
    cls = _KNOWN.get(name)
    if cls is None:
        return ConnectionFailed(f"ssh worker: {name}: {text}")
    return cls(text)
