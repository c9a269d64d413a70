# opsrunner-agent part 5: what state the job is in, and why (verify's diagnosis and status).
import os
import time

from .gpus import gpu_memory
from .jobfiles import exit_record, launch_offset, read_pidfile, when
from .procs import alive, read_proc
from .reads import TAIL_WINDOW, check_regular, file_size, read_window, tail_lines


def _signal_name(num):
    import signal as signal_mod  # its enum: loaded only to name a signal
    try:
        return signal_mod.Signals(int(num)).name
    except (ValueError, TypeError):
        return "signal %s" % num


def _uptime(pid):
    p = read_proc(pid)
    try:
        with open("/proc/uptime") as fh:
            boot_s = float(fh.read().split()[0])
        return round(max(0.0, boot_s - p.start / float(os.sysconf("SC_CLK_TCK"))), 1)
    except (OSError, ValueError, AttributeError, IndexError):
        return None


def _oom_evidence(record):
    """Why a SIGKILL looks like the OOM killer, from what is readable here; None if nothing says so."""
    import subprocess
    pid = record.get("pid")
    try:
        out = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=2).stdout
        for line in reversed(out[-(1 << 20):].decode("utf-8", "replace").splitlines()):
            if "Killed process %s " % pid in line or "Killed process %s," % pid in line:
                return "the kernel log says: %s" % line.strip()[:300]
    except (OSError, subprocess.SubprocessError):
        pass
    if record.get("oom_kills"):
        return "the job's memory cgroup counted %s oom_kill event(s) while it ran" % record["oom_kills"]
    return None


def _ended_text(record, meta):
    pid = record.get("pid")
    after = ""
    if meta and meta.get("started_at") and record.get("ended_at"):
        after = ", %.1fs after its launch" % (float(record["ended_at"]) - float(meta["started_at"]))
    if record.get("signal"):
        name = _signal_name(record["signal"])
        text = "the job (pid %s) was killed by signal %s (%s)%s" % (pid, record["signal"], name, after)
        if name == "SIGKILL":
            oom = _oom_evidence(record)
            if oom:
                text += "; OOM killer? %s" % oom
        return ("killed by %s" % name), text
    code = record.get("returncode")
    text = "the job (pid %s) exited with code %s%s" % (pid, code, after)
    if isinstance(code, int) and 128 < code < 128 + 65:
        # A shell's way of saying that the command it waited for died of a signal.
        name = _signal_name(code - 128)
        text += " (128+%d: a command it ran was killed by %s)" % (code - 128, name)
        if name == "SIGKILL":
            oom = _oom_evidence(record)
            if oom:
                text += "; OOM killer? %s" % oom
    return ("exited %s" % code), text


def _torn_down(pid):
    """A live pid without a cmdline: the job is exiting, its memory being released."""
    p = read_proc(pid)
    return p is not None and not p.cmdline


def _job_state(args, state, checks):
    """(state, diagnosis): running / hung / exited N / killed by SIGX / never started / not running."""
    pidfile, log = args.get("pidfile"), args.get("log")
    meta = state.get("meta")
    pid, start = read_pidfile(pidfile) if pidfile else (None, None)
    running = bool(pid) and alive(pid, start)
    record = exit_record(pidfile, pid) if pidfile and not running else None
    if record:
        return _ended_text(record, meta)
    if pidfile and pid is None and meta and meta.get("error"):
        return "never started", "never started: the launch at %s failed: %s" % (when(meta.get("started_at") or 0),
                                                                                 meta["error"])
    if state.get("log_error"):
        return "unknown", "the log %s cannot be read: %s" % (log, state["log_error"])
    if pidfile and pid is None and log and state.get("log_size") is None:
        return "never started", "never started: no pidfile at %s and no log at %s" % (pidfile, log)
    if running and not state.get("procs") and _torn_down(pid):
        return "ending", ("ending: the job (pid %s) is being torn down (no cmdline left) and has not recorded "
                          "an exit status yet" % pid)
    if pidfile and pid and not running:
        return "not running", "not running: pid %s from %s is gone and no exit status was recorded" % (pid, pidfile)
    if not pidfile and not state.get("procs") and log and state.get("log_size") is None:
        return "never started", "never started: no matching process and no log at %s" % log
    if running and state.get("fail_line") and "fail_grace" in state:
        return "running", ("running: the job (pid %s) is still running %gs after its log matched /%s/: %s"
                           % (pid, state["fail_grace"], args.get("log_not_regex"), state["fail_line"]))
    grows = [c for c in checks if c[0] == "log_grows"]
    if (running or state.get("procs")) and grows and not grows[0][1]:
        who = "the job (pid %s)" % pid if running else "the job"
        grew_at = state.get("grew_at")
        if grew_at:
            since = "has not grown for %.1fs (%s bytes, last grew at %s)" % (
                time.time() - grew_at, state.get("log_size"), when(grew_at))
        else:
            since = "has not grown since the launch (%s bytes)" % state.get("log_size")
        return "hung", "hung: %s is running but its log %s %s; log_grows allows %ss" % (
            who, log, since, args["log_grows"])
    if state.get("procs"):
        return "running", "running: " + "; ".join("%d %s" % (p["pid"], p["cmdline"][:150]) for p in state["procs"])
    if log and state.get("log_size") is not None:
        return "not running", ("no matching process; the log exists (%s bytes): the job started and died"
                               % state["log_size"])
    return "not running", "no matching process"


def job_status(args, state, checks):
    """What a reader of status wants per host; 'diagnosis' is popped off by a failing verify."""
    name, diagnosis = _job_state(args, state, checks)
    pid = None
    if args.get("pidfile"):
        pid, start = read_pidfile(args["pidfile"])
        pid = pid if pid and alive(pid, start) else None
    if pid is None and state.get("procs"):
        pid = state["procs"][0]["pid"]
    out = {"state": name, "pid": pid, "uptime_s": _uptime(pid) if pid else None,
           "log_size": state.get("log_size"), "log_age_s": None, "last_line": None, "diagnosis": diagnosis}
    if args.get("log") and state.get("log_size") is not None:
        last = state.get("grew_at") or state.get("mtime")
        out["log_age_s"] = round(max(0.0, time.time() - last), 1) if last else None
        lines = [ln for ln in tail_lines(args["log"], state["offset"], 5).splitlines() if ln.strip()]
        out["last_line"] = lines[-1][:300] if lines else None
    # The checks' reading when they just took one: nvidia-smi takes ~0.1 s on a GPU host.
    out["gpu_memory_mb"] = state["gpu_memory_mb"] if "gpu_memory_mb" in state else gpu_memory(args.get("gpus"))
    return out


def op_tail(args):
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
    _, offset = launch_offset(args)
    data, size = read_window(log, offset, TAIL_WINDOW)
    if data is None:
        return {"missing": True, "end": 0, "text": ""}
    start = max(offset if offset <= size else 0, size - TAIL_WINDOW)
    lines = data.decode("utf-8", "replace").splitlines()[-int(args.get("lines", 20)):] if args.get("lines") else []
    return {"text": "\n".join(lines), "end": start + len(data)}
