# opsrunner-agent part: which mounts a process sees show it a release's subfolder. A container
# that bind-mounts a release's subfolder (`lxc.mount.entry = /srv/code/releases/R/src code none
# bind`, `pct set -mp0 /srv/code/releases/R/src,mp=/code`) runs its job from /code: walking up
# from /code in the container never reaches the release. The mount's line in the mount table
# of the process's namespace (/proc/PID/mountinfo) names its filesystem (major:minor) and its
# root within that filesystem (/srv/code/releases/R/src); this agent's own table tells where
# each release lies within its filesystem. A mount whose root lies in a release shows that
# release: a path under its mount point (and under no deeper mount) lies in it. Each
# namespace's table is read once per scan, and only its mounts of a release's filesystem are
# judged; one is only believed when what the process sees at its mount point is the release's
# subfolder as this agent sees it (the same st_dev and st_ino: a mount covered by another, a
# source deleted since, show something else).
from __future__ import annotations

import os

from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, List, Optional, Tuple

    #: The mount points of one namespace's table under which a path may lie in a release: each
    #: with the release its mount shows (None: a deeper mount of something else), deepest first.
    Binds = List[Tuple[bytes, Optional[str]]]

_OCTAL = frozenset(b"01234567")


class Mount:
    """One line of a mountinfo: the filesystem (b"major:minor"), the mount's root within it,
    and its mount point (as the process whose table it is sees it)."""
    __slots__ = ("dev", "point", "root")

    def __init__(self, dev: bytes, root: bytes, point: bytes) -> None:
        self.dev, self.root, self.point = dev, root, point


def read_table(pid: str) -> list[Mount] | None:
    """The mount table of a process ("self": this agent's), in the kernel's order (a later
    mount on the same point covers an earlier one); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/mountinfo", "rb") as f:
            text = f.read()
    except OSError:
        return None
    table = []
    for line in text.split(b"\n"):
        fields = line.split(b" ", 5)
        if len(fields) == 6:
            table.append(Mount(fields[2], unescape_octal(fields[3]), unescape_octal(fields[4])))
    return table


def unescape_octal(field: bytes) -> bytes:
    """mountinfo writes a space, tab, newline or backslash of a path as \\ooo (by hand, not re:
    the agent imports no re at its start, ~3 ms of every host's)."""
    if b"\\" not in field:
        return field
    out, i = bytearray(), 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == 0x5C and len(code) == 3 and all(c in _OCTAL for c in code):
            out.append(int(code, 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


def _under(path: bytes, top: bytes) -> bool:
    """Whether a path is `top` or lies under it."""
    return path == top or path.startswith(top.rstrip(b"/") + b"/")


def _within(mount: Mount, path: bytes) -> bytes:
    """The path within the mount's filesystem of a path under its mount point."""
    return mount.root.rstrip(b"/") + path[len(mount.point.rstrip(b"/")):] or b"/"


def _containing(table: list[Mount], path: bytes) -> Mount | None:
    """The mount a path lies in: the deepest mount point above it, the last of those on it."""
    best = None
    for mount in table:
        if _under(path, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


class Places:
    """Where each release lies on its filesystem, from this agent's own mount table; and per
    mount namespace (by its key), the mounts that show a release."""
    __slots__ = ("by_dev", "host", "tables")

    def __init__(self, folder: str, names: Collection[str]) -> None:
        #: {b"major:minor": [(path within the filesystem, release, its directory here)]}
        self.by_dev: dict[bytes, list[tuple[bytes, str, bytes]]] = {}
        self.tables: dict[bytes, Binds] = {}
        self.host = read_table("self") or []
        for name in names:
            here = os.fsencode(os.path.realpath(os.path.join(folder, name)))
            mount = _containing(self.host, here)
            if mount is not None:
                self.by_dev.setdefault(mount.dev, []).append((_within(mount, here), name, here))

    def binds(self, key: bytes, pid: int, root: bytes | None) -> Binds:
        """The mounts of a process's namespace (`key`) that show a release. root: where its
        paths resolve (/proc/PID/root) where its namespace is not this agent's, else None."""
        if key not in self.tables:
            if not self.by_dev:  # no release found in this agent's table
                self.tables[key] = []
            else:
                self.tables[key] = self._judge(self.host if root is None else read_table(str(pid)) or [], root)
        return self.tables[key]

    def _judge(self, table: list[Mount], root: bytes | None) -> Binds:
        shows = [(mount, self._release(mount, root)) for mount in table]
        points = [mount.point for mount, name in shows if name]
        if not points:
            return []
        # the mounts on and under those points, the last mount on a point (it covers the
        # others) first among equally deep ones
        binds = [(mount.point, name) for mount, name in reversed(shows) if any(_under(mount.point, p) for p in points)]
        binds.sort(key=lambda bind: -len(bind[0]))
        return binds

    def _release(self, mount: Mount, root: bytes | None) -> str | None:
        """The release whose directory holds the mount's root, where the process sees it."""
        for within, name, here in self.by_dev.get(mount.dev, ()):
            if not _under(mount.root, within):
                continue
            if _same(here + mount.root[len(within.rstrip(b"/")):], (root or b"") + mount.point):
                return name
        return None


def _same(here: bytes, seen: bytes) -> bool:
    """Whether two paths (this agent's, and as a process sees it) are one directory."""
    with ignored(OSError):
        a, b = os.stat(here), os.stat(seen)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    return False


def bound(path: bytes, binds: Binds) -> str | None:
    """The release an absolute path (as the process sees it) lies in through a mount that
    shows it, or None."""
    for point, name in binds:
        if _under(path, point):
            return name
    return None
