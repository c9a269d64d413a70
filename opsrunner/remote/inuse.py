# opsrunner-agent part: which releases live processes use. A process uses a release when its
# working directory, program, command line, environment values (PYTHONPATH=<dest>/releases/R),
# mapped files (a compiled extension it loaded) or open files lie in it, or go through the
# `current` link while it points to that release. One scan serves every guard that asks "does
# a live process use this release": the prune (never delete one in use) and the removal of a
# stale `current` (never under another job running from it). Only /proc is read: a process
# of another user whose environment, maps or fds cannot be read is judged by what can be
# (its command line), as before.
from __future__ import annotations

import os

from .procs import read_proc
from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, Dict, Iterator, Optional

    #: {path prefix: None where a release's name follows it (<dest>/releases/), else the
    #: release it stands for (<dest>/current)}
    Prefixes = Dict[bytes, Optional[str]]

#: Bytes that end a release's name in a path, a command line or an environment value.
_ENDS = frozenset(b"/\0\n :;=\"'")
#: The most of one /proc file read (a big job's maps is a few MiB).
_READ_LIMIT = 32 << 20


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return b""
    chunks = []
    size = 0
    try:
        while size < _READ_LIMIT:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def _texts(pid: int) -> Iterator[tuple[str, bytes]]:
    """(how, text) of what a process runs from, cheapest first."""
    for how, name in (("its working directory", "cwd"), ("its program", "exe")):
        with ignored(OSError):
            yield how, os.fsencode(os.readlink(f"/proc/{pid}/{name}")) + b"\0"
    for how, name in (("its command line", "cmdline"), ("its environment", "environ"),
                      ("a file it has mapped", "maps")):
        yield how, _read(f"/proc/{pid}/{name}")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return
    for fd in fds:
        try:
            yield "a file it has open", os.fsencode(os.readlink(f"/proc/{pid}/fd/{fd}")) + b"\0"
        except OSError:
            continue


def _named(text: bytes, prefixes: Prefixes, names: Collection[str]) -> Iterator[tuple[str, int]]:
    """(release, offset) for each release of `names` a text names through one of the prefixes."""
    for prefix, fixed in prefixes.items():
        at = text.find(prefix)
        while at >= 0:
            end = at + len(prefix)
            stop = end
            while stop < len(text) and text[stop] not in _ENDS:
                stop += 1
            # <dest>/current stands for its release (not <dest>/current2); after releases/, a name
            name = os.fsdecode(text[end:stop]) if fixed is None else (fixed if stop == end else None)
            if name and name in names:
                yield name, at
            at = text.find(prefix, end)


def _how(how: str, text: bytes, at: int) -> str:
    """For an environment, the variable's name (never its value: it may be a secret)."""
    if how != "its environment":
        return how
    entry = text[text.rfind(b"\0", 0, at) + 1:at]
    return f"its environment: {os.fsdecode(entry.partition(b'=')[0])}"


def release_users(prefixes: Prefixes, names: Collection[str], skip_sid: int | None = None) -> dict[str, str]:
    """{release: "pid N (how it uses it)"} for the releases of `names` that a live process
    uses, the first such process each; the processes of session `skip_sid` (a job's own) and
    this agent are not counted."""
    users: dict[str, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        proc = read_proc(int(entry))
        if proc is None or proc.state == "Z" or (skip_sid and proc.sid == skip_sid):
            continue
        for how, text in _texts(proc.pid):
            for name, at in _named(text, prefixes, names):
                users.setdefault(name, f"pid {proc.pid} ({_how(how, text, at)})")
            if len(users) == len(names):
                return users
    return users
