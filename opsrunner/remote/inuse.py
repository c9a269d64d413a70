# opsrunner-agent part: which releases live processes use. A process uses a release when its
# working directory, program, command line, environment values (PYTHONPATH=<dest>/releases/R),
# mapped files (a compiled extension it loaded) or open files lie in it, or go through the
# `current` link while it points to that release. One scan serves every guard that asks "does
# a live process use this release": the prune (never delete one in use) and the removal of a
# stale `current` (never under another job running from it).
#
# Paths are judged as the process sees them, through /proc/PID/root: a directory or file lies
# in a release when it or one of its ancestors is the release's directory (the same st_dev and
# st_ino), so a job in its own mount namespace (a container that bind-mounts code_dest
# elsewhere) is seen too. Words of a command line or environment value that name `current` or
# `releases/<name>` (relative ones against the process's working directory) are resolved the
# same way. A mount that shows a release's subfolder (a container's /code, bind-mounted from
# /srv/code/releases/R/src), where walking up never reaches the release, is told by the mount
# table of the process's namespace (mounts.py): a path under it, and a word of a command line
# or environment naming one, lies in that release. A first pass reads what is cheap (cwd,
# program, command line, environment) of every process; mapped and open files only of this
# user's processes (of every one as root), and only while a release is not yet found. Another
# user's process whose working directory cannot be read (an agent that is not root) is judged
# by its command line alone, and one whose files cannot be read by the rest: the scan says how
# many were. A process in uninterruptible sleep (D state) has only what does not go through
# its memory read (a read of its command line would block); what is not found then counts as
# in use, as what the scan has not found by its deadline does. The processes a job spawns
# while the scan runs are the job's, as it is.
from __future__ import annotations

import os
import time

from .mounts import Places, bound
from .procs import foreign_proc, read_proc
from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, Dict, Iterator, Optional, Tuple

    from .mounts import Binds
    from .procs import Proc

    #: (st_dev, st_ino) of a release's directory: its name.
    Ids = Dict[Tuple[int, int], str]
    #: Paths (as a mount namespace sees them) already judged: the release they lie in, or None.
    Seen = Dict[Tuple[bytes, bytes], Optional[str]]

#: The longest one scan of /proc may take: past it, every release not found yet counts as in use.
SCAN_DEADLINE_S = 2.0
#: The most of one /proc file read (a big job's maps is a few MiB).
_READ_LIMIT = 32 << 20
#: Bytes that split a command line or an environment value into words: blanks, shell operators
#: and quotes, path-list and option separators.
_SPLIT = bytes.maketrans(b" \t\n:;=,&|()<>\"'`", b"\0" * 16)


class Scan:
    """What one scan of /proc found: {release: "pid N (how)"}, and what it could not see."""
    __slots__ = ("blind", "by_cmdline", "files_unread", "hidden", "late", "stuck", "users")

    def __init__(self) -> None:
        self.users: dict[str, str] = {}
        #: Why no process can be judged (a foreign PID namespace, a mount namespace whose paths
        #: cannot be resolved): every release counts as in use.
        self.blind: str | None = None
        #: Processes of other users judged by their command line only.
        self.by_cmdline = 0
        #: /proc hides other users' processes (hidepid=N), or None.
        self.hidden: str | None = None
        #: The scan ran out of time: the releases not found count as in use.
        self.late = False
        #: Processes in uninterruptible sleep (D state: hung NFS, a GPU driver), whose command
        #: line, environment and maps are not read (the read would block): the releases not
        #: found count as in use.
        self.stuck: list[int] = []
        #: Processes of other users whose mapped and open files were not read (an agent that is
        #: not root).
        self.files_unread = 0

    def kept(self, name: str) -> str | None:
        """Why release `name` counts as in use ("pid N (how) uses it", or why it cannot be told)."""
        if name in self.users:
            return f"{self.users[name]} uses it"
        if self.blind:
            return f"which processes use it cannot be told: {self.blind}"
        if self.late:
            return (f"which processes use it cannot be told: the scan of /proc ran out of time "
                    f"({SCAN_DEADLINE_S:g} s)")
        if self.stuck:
            return f"which processes use it cannot be told: {self._stuck()}"
        return None

    def _stuck(self) -> str:
        n = len(self.stuck)
        return (f"{n} process{'es' if n > 1 else ''} in uninterruptible sleep (D state: pid "
                f"{', '.join(map(str, self.stuck[:5]))}{', ...' if n > 5 else ''}) could not be read")

    def limits(self) -> str:
        """What the scan could not look at, as a sentence ("" where it saw every process)."""
        said = []
        if self.by_cmdline:
            said.append(f"{self.by_cmdline} process{'es' if self.by_cmdline > 1 else ''} of other users "
                        "judged by the command line only")
        if self.files_unread:
            said.append(f"the mapped and open files of {self.files_unread} process"
                        f"{'es' if self.files_unread > 1 else ''} of other users not read (the agent is not root)")
        if self.stuck:
            said.append(self._stuck())
        if self.hidden:
            said.append(f"other users' processes could not be seen (/proc is mounted with {self.hidden})")
        return "; ".join(said)


def _read(path: str) -> bytes | None:
    """A /proc file's content; None when it cannot be read (EACCES: another user's)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
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


def hidepid() -> str | None:
    """hidepid=N where /proc hides other users' processes from this agent, else None."""
    if os.geteuid() == 0:
        return None
    for line in (_read("/proc/self/mountinfo") or b"").split(b"\n"):
        fields = line.split(b" ")
        if len(fields) > 4 and fields[4] == b"/proc":
            for option in fields[-1].split(b","):
                if option.startswith(b"hidepid=") and option[8:] not in (b"0", b"off"):
                    return os.fsdecode(option)
    return None


class _Proc:
    """One process as the scan sees it: where its paths resolve (its root), its working
    directory as it sees it, its mount namespace (the key of the paths judged) and the mounts
    there that show a release's subfolder."""
    __slots__ = ("binds", "cwd", "ns", "pid", "root", "stuck")

    def __init__(self, pid: int, stuck: bool = False) -> None:
        self.pid = pid
        #: In uninterruptible sleep (D state): what is read through its memory (command line,
        #: environment, maps) would block the scan, past its deadline.
        self.stuck = stuck
        self.root = os.fsencode(f"/proc/{pid}/root")
        self.cwd: bytes | None = None
        self.ns = b""
        self.binds: Binds = []


def _release_of(path: bytes, proc: _Proc, ids: Ids, seen: Seen) -> str | None:
    """The release whose directory an absolute path (as the process sees it) lies in, or None:
    the path and its ancestors are stat'ed through the process's root."""
    key = (proc.ns, path)
    if key in seen:
        return seen[key]
    found = bound(path, proc.binds) if proc.binds else None
    at = b"" if found else path
    while at.startswith(b"/"):
        with ignored(OSError):
            st = os.stat(proc.root + at)
            found = ids.get((st.st_dev, st.st_ino))
            if found:
                break
        up = os.path.dirname(at)
        if up == at:  # "/", or "//" (a relative word of a process whose working directory is /)
            break
        at = up
    seen[key] = found
    return found


def _may_name(word: bytes, marks: tuple[bytes, ...]) -> bool:
    """Whether a word may name a release: through `current`, `releases/`, or a mount point that
    shows one (marks: those mount points, without their leading /)."""
    return b"current" in word or b"releases/" in word or (bool(marks) and any(mark in word for mark in marks))


def _words(text: bytes, env: bool, marks: tuple[bytes, ...] = ()) -> Iterator[tuple[bytes, bytes]]:
    """(variable name or b"", word) of the words of a command line or environment that may name
    a release: each whole entry, and its pieces between separators."""
    for entry in text.split(b"\0"):
        if not _may_name(entry, marks):
            continue
        name = entry.partition(b"=")[0] if env else b""
        if name == b"OLDPWD":  # where the shell was before: nothing runs from it
            continue
        value = entry[len(name) + 1:] if env else entry
        yield name, value
        for word in value.translate(_SPLIT).split(b"\0"):
            if word != value and _may_name(word, marks):
                yield name, word


def _named(word: bytes, proc: _Proc, ids: Ids, seen: Seen) -> str | None:
    """The release a word names through a `current` or `releases/<name>` component of its
    path, or as a path under a mount that shows a release (a relative one taken from the
    process's working directory), or None."""
    if not word.startswith(b"/"):
        if proc.cwd is None:
            return None  # where it is relative to is unknown
        word = proc.cwd + b"/" + word
    word = os.path.normpath(word)
    found = bound(word, proc.binds) if proc.binds else None
    if found:
        return found
    parts = word.split(b"/")
    for i, part in enumerate(parts):
        end = i + 1 if part == b"current" else i + 2 if part == b"releases" and i + 1 < len(parts) else 0
        if end:
            found = _release_of(b"/".join(parts[:end]) or b"/", proc, ids, seen)
            if found:
                return found
    return None


def _cheap(proc: _Proc, ids: Ids, devs: set[int], seen: Seen) -> Iterator[tuple[str, str]]:
    """(release, how) from what is cheap to read: working directory, program, command line,
    environment. proc.cwd is None after it when the working directory cannot be read."""
    for how, name in (("its working directory", "cwd"), ("its program", "exe")):
        link = f"/proc/{proc.pid}/{name}"
        try:
            path = os.fsencode(os.readlink(link))
            if name == "cwd":
                proc.cwd = path
            if os.stat(link).st_dev not in devs:
                continue
        except OSError:
            continue
        found = _release_of(path, proc, ids, seen)
        if found:
            yield found, how
    marks = tuple(point[1:] for point, release in proc.binds if release)
    for how, name in (("its command line", "cmdline"), ("its environment", "environ")):
        if proc.stuck:
            break
        for var, word in _words(_read(f"/proc/{proc.pid}/{name}") or b"", name == "environ", marks):
            found = _named(word, proc, ids, seen)
            if found:
                yield found, f"{how}: {os.fsdecode(var)}" if var else how


def _files(proc: _Proc, ids: Ids, devs: set[int], seen: Seen, maps_seen: set[int]) -> Iterator[tuple[str, str]]:
    """(release, how) from the files a process has mapped or open on a release's device."""
    text = b"" if proc.stuck else _read(f"/proc/{proc.pid}/maps") or b""
    key = hash((proc.ns, text))
    if key not in maps_seen:  # a forked worker maps what its parent does: judged once
        maps_seen.add(key)
        marks = tuple(b" %02x:%02x " % (os.major(dev), os.minor(dev)) for dev in devs)
        paths = set(line[line.find(b" /") + 1:] for line in text.split(b"\n")
                    if b" /" in line and any(mark in line for mark in marks))
        for path in paths:
            found = _release_of(path.rpartition(b" (deleted)")[0] or path, proc, ids, seen)
            if found:
                yield found, "a file it has mapped"
    folder = b"/proc/%d/fd/" % proc.pid
    try:
        fds = os.listdir(folder)
    except OSError:
        return
    opened = set()
    for fd in fds:  # bytes paths: no decoding; a file open many times (dup, mmap) is judged once
        with ignored(OSError):
            opened.add(os.readlink(folder + fd))
    for path in opened:
        found = _release_of(path.rpartition(b" (deleted)")[0] or path, proc, ids, seen) if path[:1] == b"/" else None
        if found:
            yield found, "a file it has open"


def _enter(proc: _Proc, my_ns: bytes, places: Places) -> str | None:
    """Read the process's mount namespace, root, and the mounts there that show a release; why
    its paths cannot be resolved where its mount namespace is not this agent's and its root
    cannot be reached, else None."""
    try:
        ns = os.fsencode(os.readlink(f"/proc/{proc.pid}/ns/mnt"))
        root = os.fsencode(os.readlink(proc.root))
    except OSError:  # another user's: its command line is judged as this agent sees paths
        proc.root = b""
        return None
    proc.ns = ns + b"|" + root
    if ns == my_ns:  # its paths are as this agent sees them, whatever its root
        proc.binds = places.binds(ns, proc.pid, None)
        return None
    try:
        os.stat(proc.root + b"/")
    except OSError as exc:
        return (f"pid {proc.pid} runs in another mount namespace ({os.fsdecode(ns)}) whose paths cannot be "
                f"resolved here ({exc.strerror})")
    if root == b"/":  # its table's mount points are then where its paths start (not in a chroot)
        proc.binds = places.binds(proc.ns, proc.pid, proc.root)
    return None


def release_users(folder: str, names: Collection[str], skip: Collection[int] = (),
                  deadline_s: float = SCAN_DEADLINE_S) -> Scan:
    """Which of the releases `names` (directories in `folder`) live processes use: the first
    such process each. The pids of `skip` (a job's own tree, stopped next), what they spawn
    meanwhile, and this agent are not counted."""
    scan, skip = Scan(), set(skip)
    scan.blind = foreign_proc()
    if scan.blind or not names:
        return scan
    ids: Ids = {}
    for name in names:
        with ignored(OSError):
            st = os.stat(os.path.join(folder, name))
            ids[(st.st_dev, st.st_ino)] = name
    devs = set(dev for dev, _ in ids)
    places = Places(folder, ids.values())
    end, me = time.monotonic() + deadline_s, os.getpid()
    my_ns = os.fsencode(os.readlink("/proc/self/ns/mnt"))
    scan.hidden = hidepid()
    seen: Seen = {}
    mine: list[_Proc] = []
    stuck: list[_Proc] = []
    outside: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me or int(entry) in skip:
            continue
        if time.monotonic() > end:
            scan.late = True
            return scan
        info = read_proc(int(entry))
        if info is None or info.state == "Z" or 2 in (info.pid, info.ppid):  # kernel threads run no code
            continue
        if _owned(info, skip, outside):
            continue
        proc = _Proc(info.pid, info.state == "D")
        scan.blind = _enter(proc, my_ns, places)
        if scan.blind:
            return scan
        for name, how in _cheap(proc, ids, devs, seen):
            scan.users.setdefault(name, f"pid {proc.pid} ({how})")
        if len(scan.users) == len(ids):
            return scan
        _sort(scan, proc, info.uid, mine)
        if proc.stuck:
            stuck.append(proc)
    if not _stuck_again(scan, stuck, ids, devs, seen, end):
        _second_pass(scan, mine, ids, devs, seen, end)
    return scan


def _stuck_again(scan: Scan, stuck: list[_Proc], ids: Ids, devs: set[int], seen: Seen, end: float) -> bool:
    """The processes that were in D state, after the first pass: one still in it is not judged
    (scan.stuck); one out of it (most are, a moment later: a disk read, an exec) is read whole.
    Whether every release is found."""
    for proc in stuck:
        if time.monotonic() > end:
            scan.late = True
            return True
        info = read_proc(proc.pid)
        if info is None or info.state == "Z":
            continue
        if info.state == "D":
            scan.stuck.append(proc.pid)
            continue
        proc.stuck = False
        for name, how in _cheap(proc, ids, devs, seen):
            scan.users.setdefault(name, f"pid {proc.pid} ({how})")
    return len(scan.users) == len(ids)


def _owned(info: Proc, skip: set[int], outside: set[int]) -> bool:
    """Whether a process descends from one of `skip`: a child the job spawned after its tree
    was read is the job's too. Its ppid chain is walked up (a parent's pid may be the greater
    one after pids wrap); the chain joins `skip`, or `outside` (known not to descend)."""
    chain, ppid = [info.pid], info.ppid
    while ppid > 0 and ppid not in outside and len(chain) < 1024:
        if ppid in skip:
            skip.update(chain)
            return True
        chain.append(ppid)
        parent = read_proc(ppid)
        ppid = parent.ppid if parent is not None else 0
    outside.update(chain)
    return False


def _sort(scan: Scan, proc: _Proc, owner: int, mine: list[_Proc]) -> None:
    """After the first pass: whose mapped and open files the second pass reads (this user's
    processes; every one as root), and what the scan could not judge."""
    if owner == -1:
        proc.stuck = False  # it exited meanwhile: nothing to judge
        return
    if owner == os.geteuid() or os.geteuid() == 0:
        mine.append(proc)
    elif proc.cwd is None:
        scan.by_cmdline += 1
    else:
        scan.files_unread += 1


def _second_pass(scan: Scan, mine: list[_Proc], ids: Ids, devs: set[int], seen: Seen, end: float) -> None:
    """Mapped and open files of this user's processes (of all, as root), while a release is not
    found yet."""
    maps_seen: set[int] = set()
    for proc in mine:
        if time.monotonic() > end:
            scan.late = True
            return
        for name, how in _files(proc, ids, devs, seen, maps_seen):
            scan.users.setdefault(name, f"pid {proc.pid} ({how})")
        if len(scan.users) == len(ids):
            return
