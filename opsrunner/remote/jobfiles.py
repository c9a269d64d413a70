"""The files beside a job's pidfile, as launch_detached writes them: the pidfile, the launch
record (train.launch.json) and the exit record (train.exit), and whether a pid is the job.

A start time in clock ticks means something only within one boot, so the records carry the
boot id; a record of an earlier boot names a job that ended with it."""
import os
import time

from .guards import Refused
from .reads import read_json, read_small


def pidfile_paths(pidfile):
    base = pidfile[:-4] if pidfile.endswith(".pid") else pidfile
    return {"pid": pidfile, "exit": base + ".exit", "meta": base + ".launch.json"}

def boot_id():
    """This boot's id: a start time in clock ticks means something only within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return None

def _boot_time():
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def when(epoch):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "an unknown time"

def started_at(proc):
    """Wall-clock start of a process (its start in clock ticks since boot, plus boot time)."""
    boot = _boot_time()
    return None if boot is None else boot + float(proc.start) / os.sysconf("SC_CLK_TCK")

def launch_record(pidfile):
    """The launch record beside a pidfile (reads.py: bounded, never a FIFO), or None."""
    return read_json(pidfile_paths(pidfile)["meta"], "launch record")

def read_pidfile(pidfile):
    """(pid, start) from a pidfile and its launch record; (None, None) if absent or bad.
    A FIFO or device is refused (NotRegular), never read; a record from another boot gives no start."""
    data = read_small(pidfile, "pidfile")
    try:
        pid = int(data.split()[0]) if data else None
    except (ValueError, IndexError):
        pid = None
    if not pid or pid < 1:
        return None, None
    meta = launch_record(pidfile) or {}
    if meta.get("pid") == pid and meta.get("boot_id") in (None, boot_id()):
        return pid, meta.get("start")
    return pid, None

def trusted_pid(pidfile, procs, pattern=None):
    """The pidfile's pid if it is the launched job, None if there is no such process (or the
    launch record is from an earlier boot: that job ended with it); else Refused.

    Trusted: the launch record beside the pidfile names this pid and its start time, or the
    task's pattern matches the process's command line too."""
    data = read_small(pidfile, "pidfile")  # NotRegular for a FIFO or device: refused, never read
    try:
        pid = int(data.split()[0]) if data else None
    except (ValueError, IndexError):
        pid = None
    if not pid or pid < 1:
        return None
    proc = procs.get(pid)
    if proc is None:
        return None
    meta = launch_record(pidfile)
    same_boot = meta and meta.get("boot_id") in (None, boot_id())  # records of 0.1 have none
    if same_boot and meta.get("pid") == pid and meta.get("start") == proc.start:
        return pid
    if meta and not same_boot:
        return None  # the job of an earlier boot ended with it: what has its pid now is not it
    if pattern and proc.cmdline:
        import re
        if re.search(pattern, proc.cmdline):
            return pid
    found = 'pid %d (from %s) is "%s" started at %s' % (pid, pidfile, proc.cmdline[:200],
                                                        when(started_at(proc)))
    if not meta:
        why = "and there is no launch record %s to show it is the job" % pidfile_paths(pidfile)["meta"]
    elif meta.get("pid") != pid:
        why = "but the launch record is for pid %s launched at %s" % (meta.get("pid"), when(meta.get("started_at")))
    else:
        why = "not the job launched at %s" % when(meta.get("started_at"))
    raise Refused("pidfile-trust", "%s, %s; refusing to signal or count it (a pattern that "
                  "matches the job's command line makes it trusted)" % (found, why))

def exit_record(pidfile, pid):
    record = read_json(pidfile_paths(pidfile)["exit"], "exit file")
    return record if record and (pid is None or record.get("pid") == pid) else None

def launch_offset(args):
    """The launch record beside the pidfile, and where this run's output starts in the log."""
    if not args.get("pidfile"):
        return None, 0
    meta = read_json(pidfile_paths(args["pidfile"])["meta"], "launch record")
    if not meta or meta.get("log") != args.get("log"):
        return meta, 0
    try:
        return meta, int(meta.get("log_offset") or 0)
    except (TypeError, ValueError):
        return meta, 0
