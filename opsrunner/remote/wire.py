# opsrunner-agent part: the wire format, in modules that cost nothing to load.
# Frames as protocol.py defines them, read from and written to descriptors. JSON goes through
# the C accelerator (_json) directly: `import json` loads re and enum, ~10 ms of CPU at every
# agent start, on every host. Where _json is missing or differs, the json module is used.
from __future__ import annotations

import os

from .protocol import DATA, END, HEAD_SIZE, JSON, MAX_DATA, MAX_JSON, frame_size

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn, Tuple

    #: (dumps, loads): a JSON text of a value, the value of a JSON text
    Codec = Tuple[Callable[[object], str], Callable[[str], object]]


def _read_exact(fd: int, size: int) -> bytes | None:
    """Exactly `size` bytes from fd, or None at EOF. Reads no further (a worker may read on)."""
    parts = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int) -> tuple[bytes, bytes] | None:
    """(kind, body) or None at EOF; raises ValueError on a malformed or oversized frame."""
    head = _read_exact(fd, HEAD_SIZE)
    if head is None:
        return None
    kind, size = head[:1], frame_size(head)
    if kind not in (JSON, DATA, END) or size > (MAX_JSON if kind == JSON else MAX_DATA):
        raise ValueError(f"bad frame {kind!r} of {size} bytes")
    body = _read_exact(fd, size) if size else b""
    if body is None:
        return None
    return kind, body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _ScanContext:
    """What _json's scanner reads off a JSONDecoder: json.loads's defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _not_serializable(obj: object) -> NoReturn:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _c_codec() -> Codec | None:
    """(dumps, loads) over _json, checked on a sample; None where that is not available."""
    try:
        import _json
        make_encoder = _json.make_encoder
        ascii_string = _json.encode_basestring_ascii
        make_encoder({}, _not_serializable, ascii_string, None, ":", ",", False, False, True)
        # typeshed types the scanner's context as a scanner (a TODO there): it is any object with
        # a JSONDecoder's attributes, as _ScanContext
        context: Any = _ScanContext()
        scan = _json.make_scanner(context)
    except (ImportError, AttributeError, TypeError):
        return None

    def dumps(obj: object) -> str:
        # An encoder per call: its circular-reference memo keeps what a failed call left in it.
        encode = make_encoder({}, _not_serializable, ascii_string, None, ":", ",", False, False, True)
        return "".join(encode(obj, 0))

    def loads(text: str) -> object:
        if text[:1] in (" ", "\t", "\n", "\r"):
            text = text.lstrip(" \t\n\r")
        try:
            value, end = scan(text, 0)
        except Exception:
            # Malformed: the json module says how (_json's own error path needs json.decoder
            # loaded, or it raises SystemError).
            import json
            return json.loads(text)
        if end != len(text) and text[end:].strip(" \t\n\r"):
            import json
            return json.loads(text)  # raises "Extra data" with its line and column
        return value

    sample = {"s": "a\u00e9\"\n", "n": [1, -2.5, 1e300, None, True, False], "e": {}}
    try:
        if dumps(sample) != '{"s":"a\\u00e9\\"\\n","n":[1,-2.5,1e+300,null,true,false],"e":{}}' \
                or loads(dumps(sample)) != sample:
            return None
    except Exception:
        return None
    return dumps, loads


def _py_codec() -> Codec:
    import json
    return (lambda obj: json.dumps(obj, separators=(",", ":"))), json.loads


json_dumps, json_loads = _c_codec() or _py_codec()
