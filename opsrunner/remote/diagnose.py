# opsrunner-agent part 5: what state the job is in, and why (verify's diagnosis and status).
from __future__ import annotations

import os
import time

from .gpus import gpu_memory
from .jobfiles import exit_record, launch_offset, read_pidfile, when
from .procs import alive, read_proc
from .reads import TAIL_WINDOW, check_regular, file_size, read_window, tail_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_files import TailArgs, TailReply
    from .protocol_jobs import Check, ExitRecord, GpuMemory, JobStatus, LaunchRecord, ProcInfo, VerifyArgs


class VerifyState:
    """What verify has seen of the job so far (verify.py keeps it across its polls; the
    diagnosis and the status read it)."""
    __slots__ = ("fail_grace", "fail_line", "gpu_memory_mb", "gpu_read", "grew_at", "log_error", "log_size",
                 "meta", "mtime", "offset", "procs", "seen_size", "text", "text_size")

    def __init__(self, meta: LaunchRecord | None, offset: int) -> None:
        #: The launch record beside the pidfile, and where this run's output starts in the log.
        self.meta = meta
        self.offset = offset
        #: The processes the checks counted.
        self.procs: list[ProcInfo] = []
        #: Why the log cannot be read (an error other than its absence), once seen.
        self.log_error: str | None = None
        self.log_size: int | None = None
        #: The log's size at the previous poll, its mtime, and when it was last seen to grow.
        self.seen_size: int | None = None
        self.mtime: float | None = None
        self.grew_at: float | None = None
        #: This run's part of the log as the regex checks last read it, and the size it had then.
        self.text = ""
        self.text_size: int | None = None
        #: The log line that log_not_regex matched, and the grace given after it (once waited).
        self.fail_line: str | None = None
        self.fail_grace: float | None = None
        #: The GPU memory a check read (gpu_read: it did, even if it found no nvidia-smi).
        self.gpu_memory_mb: GpuMemory | None = None
        self.gpu_read = False


def _signal_name(num: int) -> str:
    import signal as signal_mod  # its enum: loaded only to name a signal
    try:
        return signal_mod.Signals(int(num)).name
    except (ValueError, TypeError):
        return f"signal {num}"


def _uptime(pid: int) -> float | None:
    p = read_proc(pid)
    if p is None:
        return None
    try:
        with open("/proc/uptime") as fh:
            boot_s = float(fh.read().split()[0])
        return round(max(0.0, boot_s - p.start / float(os.sysconf("SC_CLK_TCK"))), 1)
    except (OSError, ValueError, IndexError):
        return None


def _oom_evidence(record: ExitRecord) -> str | None:
    """Why a SIGKILL looks like the OOM killer, from what is readable here; None if nothing says so."""
    import subprocess
    pid = record.get("pid")
    try:
        out = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=2).stdout
        for line in reversed(out[-(1 << 20):].decode("utf-8", "replace").splitlines()):
            if f"Killed process {pid} " in line or f"Killed process {pid}," in line:
                return f"the kernel log says: {line.strip()[:300]}"
    except (OSError, subprocess.SubprocessError):
        pass
    if record.get("oom_kills"):
        return f"the job's memory cgroup counted {record['oom_kills']} oom_kill event(s) while it ran"
    return None


def _ended_text(record: ExitRecord, meta: LaunchRecord | None) -> tuple[str, str]:
    pid, sig = record.get("pid"), record.get("signal")
    after = ""
    if meta and meta.get("started_at") and record.get("ended_at"):
        after = f", {float(record['ended_at']) - float(meta['started_at']):.1f}s after its launch"
    if sig:
        name = _signal_name(sig)
        text = f"the job (pid {pid}) was killed by signal {sig} ({name}){after}"
        if name == "SIGKILL":
            oom = _oom_evidence(record)
            if oom:
                text += f"; OOM killer? {oom}"
        return (f"killed by {name}"), text
    code = record.get("returncode")
    text = f"the job (pid {pid}) exited with code {code}{after}"
    if isinstance(code, int) and 128 < code < 128 + 65:
        # A shell's way of saying that the command it waited for died of a signal.
        name = _signal_name(code - 128)
        text += f" (128+{code - 128}: a command it ran was killed by {name})"
        if name == "SIGKILL":
            oom = _oom_evidence(record)
            if oom:
                text += f"; OOM killer? {oom}"
    return (f"exited {code}"), text


def _stop_signals(meta: LaunchRecord | None, pid: int | None) -> str | None:
    """What opsrunner sent the job `pid` to stop it, and when, from its launch record
    ("SIGTERM at T", "SIGTERM, then SIGKILL, at T"); None where the record says of none."""
    stopped = (meta or {}).get("stopped")
    if not stopped or pid is None or (meta or {}).get("pid") != pid:
        return None
    return f"{', then '.join(stopped['signals']) or 'a signal'} at {when(stopped['at'])}"


def _torn_down(pid: int) -> bool:
    """A live pid without a cmdline: the job is exiting, its memory being released."""
    p = read_proc(pid)
    return p is not None and not p.cmdline


def _job_state(args: VerifyArgs, state: VerifyState, checks: list[Check]) -> tuple[str, str]:
    """(state, diagnosis): running / hung / no log / exited N / killed by SIGX / never started / not running."""
    pidfile, log = args.get("pidfile"), args.get("log")
    meta = state.meta
    pid, start = read_pidfile(pidfile) if pidfile else (None, None)
    running = alive(pid, start) if pid else False
    record = exit_record(pidfile, pid) if pidfile and not running else None
    if record:
        name, text = _ended_text(record, meta)
        how = _stop_signals(meta, record.get("pid"))
        return (name, text + (f"; opsrunner had sent it {how} to stop it" if how else ""))
    if pidfile and pid is None and meta and meta.get("error"):
        return "never started", (f"never started: the launch at {when(meta.get('started_at') or 0)} failed: "
                                 f"{meta['error']}")
    if pidfile and pid is None and meta and meta.get("launching"):
        return "unknown", (f"not known whether it started: the launch at {when(meta.get('started_at') or 0)} was "
                           "cut short before it recorded a job (the run that launched it was interrupted, or it is "
                           "still under way); no process of it is counted")
    if state.log_error:
        return "unknown", f"the log {log} cannot be read: {state.log_error}"
    if pidfile and pid is None and log and state.log_size is None:
        return "never started", f"never started: no pidfile at {pidfile} and no log at {log}"
    if running and not state.procs and pid and _torn_down(pid):
        return "ending", (f"ending: the job (pid {pid}) is being torn down (no cmdline left) and has not recorded "
                          "an exit status yet")
    if pidfile and pid and not running:
        how = _stop_signals(meta, pid)
        if how:
            return "not running", (f"not running: the job (pid {pid}) was stopped by opsrunner ({how}); no exit "
                                   "status was recorded")
        return "not running", f"not running: pid {pid} from {pidfile} is gone and no exit status was recorded"
    if not pidfile and not state.procs and log and state.log_size is None:
        return "never started", f"never started: no matching process and no log at {log}"
    if running and state.fail_line and state.fail_grace is not None:
        return "running", (f"running: the job (pid {pid}) is still running {state.fail_grace:g}s after its log "
                           f"matched /{args.get('log_not_regex')}/: {state.fail_line}")
    if (running or state.procs) and log and state.log_size is None and _log_check_failed(checks):
        who = f"the job (pid {pid})" if running else "the job"
        return "no log", f"no log at {log}: {who} is running but its log was never written (there is no such file)"
    grows = [c for c in checks if c[0] == "log_grows"]
    if (running or state.procs) and grows and not grows[0][1]:
        return "hung", _hung(args, state, pid if running else None)
    if state.procs:
        return "running", "running: " + "; ".join(f"{p['pid']} {p['cmdline'][:150]}" for p in state.procs)
    if log and state.log_size is not None:
        return "not running", (f"no matching process; the log exists ({state.log_size} bytes): the job started "
                               "and died")
    return "not running", "no matching process"


def _log_check_failed(checks: list[Check]) -> bool:
    return any(c[0].startswith("log_") and not c[1] for c in checks)


def _hung(args: VerifyArgs, state: VerifyState, pid: int | None) -> str:
    """The diagnosis of a job whose log stopped growing (pid: the pidfile's job, running)."""
    who = f"the job (pid {pid})" if pid is not None else "the job"
    grew_at = state.grew_at
    if grew_at:
        since = (f"has not grown for {time.time() - grew_at:.1f}s ({state.log_size} bytes, last grew at "
                 f"{when(grew_at)})")
    else:
        since = f"has not grown since the launch ({state.log_size} bytes)"
    return f"hung: {who} is running but its log {args.get('log')} {since}; log_grows allows {args.get('log_grows')}s"


def job_status(args: VerifyArgs, state: VerifyState, checks: list[Check]) -> JobStatus:
    """What a reader of status wants per host; 'diagnosis' is popped off by a failing verify."""
    name, diagnosis = _job_state(args, state, checks)
    pid = None
    pidfile, log = args.get("pidfile"), args.get("log")
    if pidfile:
        pid, start = read_pidfile(pidfile)
        pid = pid if pid and alive(pid, start) else None
    if pid is None and state.procs:
        pid = state.procs[0]["pid"]
    out: JobStatus = {"state": name, "pid": pid, "uptime_s": _uptime(pid) if pid else None,
                      "log_size": state.log_size, "log_age_s": None, "last_line": None, "diagnosis": diagnosis,
                      "gpu_memory_mb": None}
    if log and state.log_size is not None:
        last = state.grew_at or state.mtime
        out["log_age_s"] = round(max(0.0, time.time() - last), 1) if last else None
        lines = [ln for ln in tail_lines(log, state.offset, 5).splitlines() if ln.strip()]
        out["last_line"] = lines[-1][:300] if lines else None
    # The checks' reading when they just took one. Else nvidia-smi only where asked (gpu_memory,
    # gpus) or for a failing verdict's diagnosis: it takes ~0.1 s on a GPU host and can hang
    # for seconds on a GPU in a bad state, and a verify that checks no GPU must not wait on it.
    if state.gpu_read:
        out["gpu_memory_mb"] = state.gpu_memory_mb
    elif args.get("gpu_memory") or args.get("gpus") or not all(c[1] for c in checks):
        out["gpu_memory_mb"] = gpu_memory(args.get("gpus"))
    meta = state.meta or {}
    if meta.get("release") and pid is not None and meta.get("pid") == pid:  # the release it runs from
        out["release"], out["commit"] = meta.get("release"), meta.get("commit")
    return out


def op_tail(args: TailArgs) -> TailReply:
    """`opsrunner logs`: the latest run's last lines, or (with `since`) what was appended since."""
    log = args["log"]
    problem = check_regular(log, "log")
    if problem:
        return {"error": problem}
    if args.get("since") is not None:
        since = int(args["since"])
        size = file_size(log)
        if size is None:
            return {"missing": True, "end": 0, "text": ""}
        if size < since:  # truncated or replaced: start over
            since = 0
        data, _ = read_window(log, since, TAIL_WINDOW)
        start = max(since, size - TAIL_WINDOW)
        return {"text": (data or b"").decode("utf-8", "replace"), "end": start + len(data or b""),
                "skipped": start - since}
    _, offset = launch_offset(args.get("pidfile"), log)
    data, size = read_window(log, offset, TAIL_WINDOW)
    if data is None or size is None:
        return {"missing": True, "end": 0, "text": ""}
    start = max(offset if offset <= size else 0, size - TAIL_WINDOW)
    lines = data.decode("utf-8", "replace").splitlines()[-int(args.get("lines", 20)):] if args.get("lines") else []
    return {"text": "\n".join(lines), "end": start + len(data)}
