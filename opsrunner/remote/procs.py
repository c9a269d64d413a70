# opsrunner-agent part 1: the process table (Python >= 3.8, stdlib only; runs on targets).
# Sent together with agent.py as one `python3 -c` script; no imports between the parts.
from __future__ import annotations

import os
import time

from .jobfiles import SUPERVISOR_NAME, launch_record, live_supervisors, mark_stopped, trusted_pid
from .reads import NotRegular, read_small
from .watchdog import ignored, open_pidfd, walk

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Iterable, Mapping

    from .protocol_jobs import KillArgs, KillReply, ProcInfo, SelectArgs, Selector, SelectReply
else:
    import _signal as signal  # the C module: `signal` imports enum (~3 ms at every agent start)

#: "opsrunner-lock-keeper": the job lock's keeper of earlier opsrunner versions (a run of an older
#: controller may still hold one on a target): never mistaken for a job.
AGENT_MARKERS = ("opsrunner-agent", SUPERVISOR_NAME, "opsrunner-watchdog", "opsrunner-lock-keeper")


def foreign_proc() -> str | None:
    """Why pids cannot be judged here, or None: the /proc this agent sees belongs to another
    PID namespace (a wrapper chain entered one without mounting a /proc of its own), so every
    pid read from it, or recorded by a job started here, names another process."""
    try:
        seen = os.readlink("/proc/self")
    except OSError as exc:
        seen = f"unreadable ({exc.strerror})"
    if seen == str(os.getpid()):
        return None
    return (f"the target's /proc is not this agent's PID namespace's (the agent runs as pid {os.getpid()}, "
            f"/proc/self is {seen}): no pid can be checked, signalled or recorded truly here. A wrapper chain "
            "that enters a PID namespace must mount a /proc of its own (unshare --pid --fork --mount-proc)")


class Proc:
    """A /proc entry: stat read at once; cmdline and owner read on first use (a scan of a
    busy host reads one file per process, not two and a stat)."""
    __slots__ = ("_cmdline", "_uid", "pgid", "pid", "ppid", "sid", "start", "state")
    _cmdline: str | None
    _uid: int | None
    pgid: int
    pid: int
    ppid: int
    sid: int
    #: Clock ticks since boot.
    start: int
    state: str

    @property
    def cmdline(self) -> str:
        if self._cmdline is None:
            try:
                with open(f"/proc/{self.pid}/cmdline", "rb") as fh:
                    raw = fh.read()
            except OSError:
                raw = b""
            self._cmdline = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        return self._cmdline

    @property
    def uid(self) -> int:
        if self._uid is None:
            try:
                self._uid = os.stat(f"/proc/{self.pid}").st_uid
            except OSError:
                self._uid = -1
        return self._uid

    def as_dict(self) -> ProcInfo:
        return {"pid": self.pid, "ppid": self.ppid, "pgid": self.pgid, "sid": self.sid,
                "uid": self.uid, "cmdline": self.cmdline}


def read_proc(pid: int) -> Proc | None:
    # os.open/os.read: a scan reads every process's stat (kill_old scans once per host and
    # task), and a file object cost ~40% more per process.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    if b")" not in stat:
        return None  # gone between the open and the read
    fields = stat[stat.rindex(b")") + 2:].split(None, 20)
    p = Proc()
    p.pid = pid
    p.state = fields[0].decode()
    p.ppid, p.pgid, p.sid = int(fields[1]), int(fields[2]), int(fields[3])
    p.start = int(fields[19])
    p._cmdline = None
    p._uid = None
    return p


def table_for(args: Selector, tree: bool) -> dict[int, Proc]:
    """The processes select() needs: all of them, or, for a pidfile alone without its tree
    (verify, which polls), just that pid (ancestors are read as they are walked)."""
    if tree or args.get("pattern") or not args.get("pidfile"):
        return table()
    try:
        data = read_small(args["pidfile"], "pidfile")
        pid = int(data.split()[0]) if data else None
    except (ValueError, IndexError, NotRegular):
        return table()  # select() reports what is wrong with the pidfile
    p = read_proc(pid) if pid and pid > 0 else None
    return {p.pid: p} if p is not None and p.state != "Z" else {}


def table() -> dict[int, Proc]:
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = read_proc(int(name))
            if p is not None and p.state != "Z":
                procs[p.pid] = p
    return procs


def alive(pid: int, start: int | None = None) -> bool:
    p = read_proc(pid)
    if p is None or p.state == "Z":
        return False
    return start is None or p.start == start


def ancestors(procs: Mapping[int, Proc]) -> set[int]:
    """This agent, its parents up to init: the shell, wrapper chain and session carrying it."""
    out = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        p = procs.get(pid) or read_proc(pid)
        if p is None:
            break
        pid = p.ppid
    out.add(1)
    return out


def descendants(procs: Mapping[int, Proc], roots: Iterable[int]) -> set[int]:
    """Descendants of `roots` in a process table ({pid: Proc})."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    return set(walk(children, roots))


def uid_of(user: str | int | None) -> int | None:
    import pwd
    if user is None:
        return None
    if isinstance(user, int) or user.isdigit():
        return int(user)
    return pwd.getpwnam(user).pw_uid


def select(args: Selector, procs: Mapping[int, Proc], tree: bool = True) -> tuple[list[int], list[int]]:
    """Selected processes: by pidfile (pid, its group, its descendants, and every descendant
    of the supervisors its launch record names: what the job daemonized) and/or pattern.

    Never: this agent, its ancestors, opsrunner's own helpers (the supervisors themselves), or
    PID 1. A process group is taken only when a selected job leads it.
    Returns (selected pids, main pids) where main pids are the pidfile pid / pattern matches.
    """
    protected = ancestors(procs)
    uid = uid_of(args.get("user"))
    main: set[int] = set()
    pidfile = args.get("pidfile")
    pattern = args.get("pattern")
    if pidfile:
        pid = trusted_pid(pidfile, procs, pattern)  # raises Refused for a pid that is not the job
        if pid:
            main.add(pid)
    if pattern:
        import re
        rx = re.compile(pattern)
        for p in procs.values():
            if p.cmdline and rx.search(p.cmdline):
                main.add(p.pid)
    main = set(pid for pid in main if _eligible(procs[pid], protected, uid))
    selected = set(main)
    if tree:
        groups = set(procs[pid].pgid for pid in main if procs[pid].pgid == pid)
        selected |= set(p.pid for p in procs.values() if p.pgid in groups)
        selected |= descendants(procs, main)
        if pidfile:  # also once the job has ended: a helper it daemonized may live on
            keepers = live_supervisors(launch_record(pidfile), procs.get)
            selected |= descendants(procs, [pair[0] for pair in keepers])
    selected = set(pid for pid in selected if pid in procs and _eligible(procs[pid], protected, uid))
    return sorted(selected), sorted(main)


def _eligible(p: Proc, protected: set[int], uid: int | None) -> bool:
    if p.pid in protected or not p.cmdline:
        return False
    if any(m in p.cmdline for m in AGENT_MARKERS):  # anywhere: a wrapper layer names it after its own words
        return False
    return uid is None or p.uid == uid


def op_kill(args: KillArgs) -> KillReply:
    """Stop the selected processes: the signal, up to `grace` seconds for them to exit, then
    SIGKILL. The controller's kill_old asks in steps instead, to know what was done should the
    run be interrupted meanwhile: `signal_only` (select and signal), then `follow` (wait a
    while for those signalled; with `force`, SIGKILL what is left)."""
    if args.get("follow") is not None:
        return _follow(args)
    procs = table()
    selected, main = select(args, procs)
    victims = [procs[pid].as_dict() for pid in selected]
    if args.get("check_mode") or not selected:
        return {"changed": bool(selected), "killed": victims, "main": main}
    starts = dict((pid, procs[pid].start) for pid in selected)
    name = "SIG" + str(args.get("signal", "TERM")).upper().replace("SIG", "")
    sig: int = getattr(signal, name)
    signalled = [pid for pid in selected if alive(pid, starts[pid])]  # never a pid reused since the table was read
    for pid in signalled:
        send_signal(pid, sig)
    _mark_stopped(args, main, signalled, name)
    if args.get("signal_only"):
        return {"changed": True, "killed": victims, "main": main, "signal": name,
                "signalled": [[pid, starts[pid]] for pid in signalled]}
    survivors = _wait_gone(starts, float(args.get("grace", 10)))
    return _force(args, starts, survivors, victims, main, procs)


def _force(args: KillArgs, starts: Mapping[int, int], survivors: set[int], victims: list[ProcInfo],
           main: list[int], procs: Mapping[int, Proc]) -> KillReply:
    """SIGKILL to what outlived the grace, and confirm it is gone."""
    forced = sorted(survivors)
    for pid in survivors:
        send_signal(pid, signal.SIGKILL)
    if forced:
        _mark_stopped(args, main, forced, "SIGKILL")
    survivors = _wait_gone(dict((p, starts[p]) for p in survivors), 5.0)
    result: KillReply = {"changed": True, "killed": victims, "main": main, "forced": forced}
    if survivors:
        left = [procs[pid].as_dict() for pid in sorted(survivors) if pid in procs]
        result["error"] = "processes survived SIGKILL: " + "; ".join(
            f"{p['pid']} ({p['cmdline'][:120]})" for p in left)
        result["survivors"] = left
    return result


def _follow(args: KillArgs) -> KillReply:
    """The processes an earlier signal_only step signalled ([pid, start] pairs): wait up to
    `wait` seconds for them to exit and say which are left; with `force`, SIGKILL those left
    and confirm they are gone."""
    starts = dict((int(pair[0]), int(pair[1])) for pair in args.get("follow") or [])
    main = [pid for pid in starts if pid in (args.get("main") or [])]
    if args.get("force"):
        procs = dict((pid, read_proc(pid)) for pid in starts)
        live = dict((pid, p) for pid, p in procs.items() if p is not None and p.start == starts[pid] and p.state != "Z")
        return _force(args, starts, set(live), [], main, live)
    left = _wait_gone(starts, float(args.get("wait", 0)))
    return {"changed": True, "killed": [], "main": main, "left": [[pid, starts[pid]] for pid in sorted(left)]}


def _mark_stopped(args: KillArgs, main: list[int], pids: list[int], name: str) -> None:
    """The pidfile's job, signalled here: its launch record says so (mark_stopped)."""
    pidfile = args.get("pidfile")
    for pid in main:
        if pidfile and pid in pids:
            mark_stopped(pidfile, pid, name)


def send_signal(pid: int, sig: int) -> None:
    with ignored(OSError):
        os.kill(pid, sig)


def _wait_gone(starts: Mapping[int, int], wait_s: float) -> set[int]:
    """The pids of `starts` ({pid: start time}) still alive after up to wait_s seconds. Woken
    by their pidfds as each exits (a 50 ms poll cost 25 ms a kill on average); without
    pidfds, polled."""
    import select as select_lib  # this part's select() is the process selection
    deadline = time.time() + wait_s
    fds: dict[int, int] = {}
    for pid in starts:
        fd = open_pidfd(pid)
        if fd is not None:
            fds[fd] = pid
    try:
        poller = select_lib.poll()
        for fd in fds:
            poller.register(fd, select_lib.POLLIN)
        left = dict(starts)
        watched = dict(fds)
        while left:
            # A pidfd opened after the pid was reused names the new process: alive() with the
            # start time decides, the pidfd only wakes us.
            left = dict((pid, st) for pid, st in left.items() if alive(pid, st))
            for fd, pid in list(watched.items()):
                if pid not in left:
                    poller.unregister(fd)
                    del watched[fd]
            now = time.time()
            if not left or now >= deadline:
                break
            if len(fds) == len(starts):
                # A pidfd wakes us as its process exits, a moment before /proc shows it as a
                # zombie: a pid that still looks alive keeps its (still readable) pidfd and is
                # looked at again after a ms. Unregistered, it left nothing to wake the poll
                # until the deadline: kill_old then took its whole grace (5 s in a restart).
                if poller.poll(max(1, int((deadline - now) * 1000))):
                    time.sleep(0.001)
            else:
                time.sleep(0.01)
        return set(left)
    finally:
        for fd in fds:
            os.close(fd)


def op_select(args: SelectArgs) -> SelectReply:
    procs = table()
    selected, main = select(args, procs, tree=bool(args.get("tree", False)))
    return {"procs": [procs[pid].as_dict() for pid in selected], "main": main}
