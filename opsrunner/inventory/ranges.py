"""Host ranges in inventory host names: `web[01:03]`, `db-[a:c]`, `n[1:10:2]` (ends inclusive)."""

from __future__ import annotations

import string


class RangeError(ValueError):
    """A malformed `[begin:end(:step)]` range in a host name."""


def has_range(name: str) -> bool:
    return "[" in name and "]" in name.split("[", 1)[1]


def _sequence(begin: str, end: str, step: str) -> list[str]:
    begin = begin or "0"
    if not end:
        raise RangeError("host range must specify end value")
    try:
        stride = int(step)
    except ValueError:
        raise RangeError(f"host range step must be a number, not '{step}'") from None
    if stride < 1:
        raise RangeError("host range step must be at least 1")
    if begin in string.ascii_letters and end in string.ascii_letters:
        first, last = string.ascii_letters.index(begin), string.ascii_letters.index(end)
        if first > last:
            raise RangeError("host range must have begin <= end")
        return list(string.ascii_letters[first:last + 1:stride])
    try:
        first, last = int(begin), int(end)
    except ValueError:
        raise RangeError(f"host range [{begin}:{end}] must be numbers or single letters") from None
    width = len(begin) if begin[0] == "0" and len(begin) > 1 else 0
    if width and width != len(end):
        raise RangeError("host range must specify equal-length begin and end formats")
    return [str(i).zfill(width) for i in range(first, last + 1, stride)]


def expand_host_range(name: str) -> list[str]:
    """All names a ranged host name stands for; a name without a range is itself."""
    if not has_range(name):
        return [name]
    head, rest = name.split("[", 1)
    body, tail = rest.split("]", 1)
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise RangeError("host range must be begin:end or begin:end:step")
    step = bounds[2] if len(bounds) == 3 else "1"
    out: list[str] = []
    for item in _sequence(bounds[0], bounds[1], step):
        out += expand_host_range(head + item + tail)
    return out
