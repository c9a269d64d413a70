"""The files beside a job's pidfile, as launch_detached writes them: the pidfile, the launch
record (train.launch.json) and the exit record (train.exit), and whether a pid is the job.

A start time in clock ticks means something only within one boot, so the records carry the
boot id; a record of an earlier boot names a job that ended with it."""
from __future__ import annotations

import os
import time

from .atomic import write_atomic
from .guards import Refused
from .reads import Unreadable, load_json, read_json, read_small
from .watchdog import ignored
from .wire import json_dumps

#: The supervisor's command line starts with this (launch.py); it never names the job.
SUPERVISOR_NAME = "opsrunner-supervisor"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping, Protocol, TypedDict

    from .protocol_jobs import ExitRecord, LaunchRecord

    class Proc(Protocol):
        """What these functions read of a process (procs.py's Proc, not imported: procs imports this)."""
        @property
        def start(self) -> int: ...
        @property
        def cmdline(self) -> str: ...

    class JobPaths(TypedDict):
        """The pidfile and the records beside it (train.pid, train.exit, train.launch.json,
        and the last good run train.good.json)."""
        pid: str
        exit: str
        meta: str
        good: str


def pidfile_paths(pidfile: str) -> JobPaths:
    base = pidfile[:-4] if pidfile.endswith(".pid") else pidfile
    return {"pid": pidfile, "exit": base + ".exit", "meta": base + ".launch.json", "good": base + ".good.json"}

def boot_id() -> str | None:
    """This boot's id: a start time in clock ticks means something only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return None

def _boot_time() -> int | None:
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "an unknown time"

def started_at(proc: Proc) -> float | None:
    """Wall-clock start of a process (its start in clock ticks since boot, plus boot time)."""
    boot = _boot_time()
    return None if boot is None else boot + float(proc.start) / os.sysconf("SC_CLK_TCK")

# -- the records as JSON files hold them: each key kept with the type its writer gives it ----
def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None

def _number(value: object) -> float | None:
    return value if isinstance(value, (int, float)) else None

def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None

def as_launch_record(raw: Mapping[str, object]) -> LaunchRecord:
    """A launch record read from its file (launch.py writes it)."""
    record: LaunchRecord = {}
    if "pid" in raw:
        record["pid"] = _int(raw["pid"])
    if "start" in raw:
        record["start"] = _int(raw["start"])
    argv, offset, started, sup, error = (raw.get(key) for key in (
        "argv", "log_offset", "started_at", "supervisor", "error"))
    if isinstance(argv, list):
        record["argv"] = [str(arg) for arg in argv]
    if "log" in raw:
        record["log"] = _text(raw["log"])
    if isinstance(offset, int):
        record["log_offset"] = offset
    if isinstance(started, (int, float)):
        record["started_at"] = started
    if "boot_id" in raw:
        record["boot_id"] = _text(raw["boot_id"])
    if "supervisor" in raw:
        record["supervisor"] = [_int(v) for v in sup] if isinstance(sup, list) else None
    earlier = raw.get("earlier_supervisors")
    if isinstance(earlier, list):
        record["earlier_supervisors"] = [[_int(v) for v in pair] for pair in earlier if isinstance(pair, list)]
    if isinstance(error, str):
        record["error"] = error
    if raw.get("launching") is True:
        record["launching"] = True
    stopped = raw.get("stopped")
    if isinstance(stopped, dict) and isinstance(stopped.get("at"), (int, float)):
        record["stopped"] = {"at": stopped["at"], "signals": [str(s) for s in stopped.get("signals") or []
                                                               if isinstance(s, str)]}
    env = raw.get("env")
    if isinstance(env, dict):
        record["env"] = dict((str(k), str(v)) for k, v in env.items())
    chdir, umask, release, release_dir, commit = (_text(raw.get(key)) for key in (
        "chdir", "umask", "release", "release_dir", "commit"))
    record.update({"chdir": chdir, "umask": umask, "release": release, "release_dir": release_dir,
                   "commit": commit})
    return record

def as_exit_record(raw: Mapping[str, object]) -> ExitRecord:
    """An exit record read from its file (supervisor.py writes it)."""
    record: ExitRecord = {}
    pid, ended, kills = raw.get("pid"), raw.get("ended_at"), raw.get("oom_kills")
    if isinstance(pid, int):
        record["pid"] = pid
    if "start" in raw:
        record["start"] = _int(raw["start"])
    if isinstance(ended, (int, float)):
        record["ended_at"] = ended
    if "returncode" in raw:
        record["returncode"] = _int(raw["returncode"])
    if "signal" in raw:
        record["signal"] = _int(raw["signal"])
    if isinstance(kills, int):
        record["oom_kills"] = kills
    return record

def launch_record(pidfile: str) -> LaunchRecord | None:
    """The launch record beside a pidfile (reads.py: bounded, never a FIFO), or None when it
    is absent or cannot be used. Only where that is safe to treat as no record (a status, a
    job's offset in its log); load_launch_record tells the two apart."""
    raw = read_json(pidfile_paths(pidfile)["meta"], "launch record")
    return None if raw is None else as_launch_record(raw)

def load_launch_record(pidfile: str) -> LaunchRecord | None:
    """The launch record beside a pidfile, or None when there is none; Unreadable, naming it
    and saying why, when it is there but cannot be used (corrupt, too large, a FIFO)."""
    raw = load_json(pidfile_paths(pidfile)["meta"], "launch record")
    return None if raw is None else as_launch_record(raw)

def _pid_in(data: bytes | None) -> int | None:
    """The pid a pidfile's bytes name (its first word), or None."""
    try:
        return int(data.split()[0]) if data else None
    except (ValueError, IndexError):
        return None

def read_pidfile(pidfile: str) -> tuple[int | None, int | None]:
    """(pid, start) from a pidfile and its launch record; (None, None) if absent or bad.
    A FIFO or device is refused (NotRegular), never read; a record from another boot gives no start."""
    pid = _pid_in(read_small(pidfile, "pidfile"))
    if not pid or pid < 1:
        return None, None
    meta = launch_record(pidfile) or {}
    if meta.get("pid") == pid and meta.get("boot_id") in (None, boot_id()):
        return pid, meta.get("start")
    return pid, None

def trusted_pid(pidfile: str, procs: Mapping[int, Proc], pattern: str | None = None) -> int | None:
    """The pidfile's pid if it is the launched job, None if there is no such process (or the
    launch record is from an earlier boot: that job ended with it); else Refused.

    Trusted: the launch record beside the pidfile names this pid and its start time, or the
    task's pattern matches the process's command line too."""
    pid = _pid_in(read_small(pidfile, "pidfile"))  # NotRegular for a FIFO or device: refused, never read
    if not pid or pid < 1:
        return None
    proc = procs.get(pid)
    if proc is None:
        return None
    try:
        meta, unusable = load_launch_record(pidfile), None
    except Unreadable as exc:
        meta, unusable = None, exc
    same_boot = meta and meta.get("boot_id") in (None, boot_id())  # records of 0.1 have none
    if meta and same_boot and meta.get("pid") == pid and meta.get("start") == proc.start:
        return pid
    if meta and not same_boot:
        return None  # the job of an earlier boot ended with it: what has its pid now is not it
    if pattern and proc.cmdline:
        import re
        if re.search(pattern, proc.cmdline):
            return pid
    found = f'pid {pid} (from {pidfile}) is "{proc.cmdline[:200]}" started at {when(started_at(proc))}'
    if unusable is not None:
        why = (f"and its launch record {unusable.path} is unreadable ({unusable.why}), so nothing shows it is "
               "the job")
    elif not meta:
        why = f"and there is no launch record {pidfile_paths(pidfile)['meta']} to show it is the job"
    elif meta.get("pid") != pid:
        why = f"but the launch record is for pid {meta.get('pid')} launched at {when(meta.get('started_at'))}"
    else:
        why = f"not the job launched at {when(meta.get('started_at'))}"
    raise Refused("pidfile-trust", f"{found}, {why}; refusing to signal or count it (a pattern that "
                  "matches the job's command line makes it trusted)")

def mark_stopped(pidfile: str, pid: int, signal_name: str) -> None:
    """The launch record of the job `pid` says opsrunner sent it `signal_name`, and when: a job
    found gone later is told stopped, not crashed, even where no exit status was recorded.
    Nothing is written where the record names another job or cannot be read."""
    path = pidfile_paths(pidfile)["meta"]
    raw = read_json(path, "launch record")
    if raw is None or raw.get("pid") != pid:
        return
    earlier = as_launch_record(raw).get("stopped")
    raw["stopped"] = {"at": time.time(), "signals": [*(earlier["signals"] if earlier else []), signal_name]}
    with ignored(OSError):  # the stop itself goes on: this record only explains it later
        write_atomic(path, json_dumps(raw).encode(), 0o600)

def exit_record(pidfile: str, pid: int | None) -> ExitRecord | None:
    raw = read_json(pidfile_paths(pidfile)["exit"], "exit file")
    record = None if raw is None else as_exit_record(raw)
    return record if record and (pid is None or record.get("pid") == pid) else None

def launch_offset(pidfile: str | None, log: str | None) -> tuple[LaunchRecord | None, int]:
    """The launch record beside the pidfile, and where this run's output starts in the log."""
    if not pidfile:
        return None, 0
    meta = launch_record(pidfile)
    if not meta or meta.get("log") != log:
        return meta, 0
    return meta, meta.get("log_offset") or 0

def live_supervisors(meta: LaunchRecord | None, lookup: Callable[[int], Proc | None]) -> list[list[int]]:
    """[pid, start] of the supervisors a launch record names (its launch's and those of earlier
    launches it carried: earlier_supervisors) that still live: each found by `lookup` with its
    recorded start time and the supervisor's command line, in the record's boot.

    A supervisor is its job's child subreaper: what the job's tree daemonized (fork, setsid,
    fork) is its child, and it lives on while such a helper does, after the job has ended."""
    if not meta or meta.get("boot_id") not in (None, boot_id()):
        return []
    found: list[list[int]] = []
    for pair in [meta.get("supervisor"), *(meta.get("earlier_supervisors") or [])]:
        if not pair or len(pair) != 2 or pair[0] is None or pair[1] is None:
            continue
        proc = lookup(pair[0])
        if proc is not None and proc.start == pair[1] and proc.cmdline.startswith(SUPERVISOR_NAME):
            found.append([pair[0], pair[1]])
    return found
