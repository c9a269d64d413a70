# opsrunner-agent part 3: verify and the GPU wait of kill_old.
import json
import os
import re
import time


def _log_state(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size


def _log_tail(path, offset=0, lines=20):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(offset if offset <= size else 0, size - 65536))
            data = fh.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _log_text(path, offset=0, limit=8 << 20):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(offset if offset <= size else 0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return None


def _listening(port):
    hexport = ":%04X" % int(port)
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    if parts[1].endswith(hexport) and parts[3] == "0A":
                        return True
        except OSError:
            continue
    return False


def gpu_memory(gpus=None):
    """{index: used MB} from nvidia-smi, or None when there is no nvidia-smi."""
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    used = {}
    for line in out.stdout.decode().splitlines():
        if "," in line:
            idx, mb = [x.strip() for x in line.split(",", 1)]
            if gpus is None or int(idx) in [int(g) for g in gpus]:
                used[int(idx)] = float(mb)
    return used


def _checks(args, state):
    """Evaluate every requested check once; returns a list of (name, ok, expected, actual)."""
    out = []
    procs = table()
    sel_args = dict(args)
    if args.get("pattern"):
        sel_args.pop("pidfile", None)  # count what the pattern sees; the pidfile serves the diagnosis
    _, main = select(sel_args, procs, tree=False)
    state["procs"] = [procs[p].as_dict() for p in main]
    count = len(main)
    if args.get("processes") is not None:
        out.append(("processes", count == int(args["processes"]), "exactly %s" % args["processes"], count))
    if args.get("min_processes") is not None:
        out.append(("min_processes", count >= int(args["min_processes"]), ">= %s" % args["min_processes"], count))
    log = args.get("log")
    if log:
        size = _log_state(log)
        state["log_size"] = size
        if args.get("log_exists", True):
            out.append(("log_exists", size is not None, "exists", "missing" if size is None else "exists"))
        if args.get("log_min_bytes") is not None:
            out.append(("log_min_bytes", (size or 0) >= int(args["log_min_bytes"]),
                        ">= %s bytes" % args["log_min_bytes"], "%s bytes" % (size or 0)))
        if args.get("log_grows"):
            grew = size is not None and state.get("log_size0") is not None and size > state["log_size0"]
            if size is not None and state.get("log_size0") is None:
                state["log_size0"] = size
            out.append(("log_grows", grew, "grows within %ss" % args["log_grows"],
                        "%s -> %s bytes" % (state.get("log_size0"), size)))
        text = None
        if args.get("log_regex") or args.get("log_not_regex"):
            text = _log_text(log, _launch_offset(args)) or ""
        if args.get("log_regex"):
            found = re.search(args["log_regex"], text, re.M) is not None
            out.append(("log_regex", found, "log matches /%s/" % args["log_regex"],
                        "matched" if found else "no match"))
        if args.get("log_not_regex"):
            m = re.search(args["log_not_regex"], text, re.M)
            out.append(("log_not_regex", m is None, "log free of /%s/" % args["log_not_regex"],
                        "found %r" % m.group(0) if m else "absent"))
    if args.get("port") is not None:
        up = _listening(args["port"])
        out.append(("port", up, "port %s listening" % args["port"], "listening" if up else "not listening"))
    if args.get("gpu_min_memory_mb") is not None:
        used = gpu_memory(args.get("gpus"))
        ok = bool(used) and all(mb >= float(args["gpu_min_memory_mb"]) for mb in used.values())
        out.append(("gpu_min_memory_mb", ok, ">= %s MB on each GPU" % args["gpu_min_memory_mb"],
                    "no nvidia-smi" if used is None else used))
    return out


def _launch_offset(args):
    """Where the current run's output starts in an appended log (recorded at launch)."""
    if not args.get("pidfile"):
        return 0
    try:
        with open(pidfile_paths(args["pidfile"])["meta"]) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return 0
    return int(meta.get("log_offset") or 0) if meta.get("log") == args.get("log") else 0


def _diagnose(args, state):
    pidfile, log = args.get("pidfile"), args.get("log")
    exit_record = None
    if pidfile:
        try:
            with open(pidfile_paths(pidfile)["exit"]) as fh:
                exit_record = json.load(fh)
        except (OSError, ValueError):
            pass
    pid, start = read_pidfile(pidfile) if pidfile else (None, None)
    running = bool(pid) and alive(pid, start)
    if exit_record and not running:
        if exit_record.get("signal"):
            return "the job (pid %s) was killed by signal %s" % (exit_record["pid"], exit_record["signal"])
        return "the job (pid %s) exited with code %s" % (exit_record["pid"], exit_record["returncode"])
    if pidfile and pid is None and log and state.get("log_size") is None:
        return "never started: no pidfile at %s and no log at %s" % (pidfile, log)
    if pidfile and pid and not running:
        return "not running: pid %s from %s is gone and no exit status was recorded" % (pid, pidfile)
    if not pidfile and not state.get("procs") and log and state.get("log_size") is None:
        return "never started: no matching process and no log at %s" % log
    if running and args.get("log_grows") and state.get("log_size") == state.get("log_size0"):
        return "running (pid %s) but the log stopped growing at %s bytes" % (pid, state.get("log_size"))
    if state.get("procs"):
        return "running: " + "; ".join("%d %s" % (p["pid"], p["cmdline"][:150]) for p in state["procs"])
    if log and state.get("log_size") is not None:
        return "no matching process; the log exists (%s bytes): the job started and died" % state["log_size"]
    return "no matching process"


def op_verify(args):
    """Poll until every check passes (up to `within`), then keep them passing for `stable_for`."""
    state = {}
    window = max(float(args.get("within") or 0), float(args.get("log_grows") or 0))
    stable_for = float(args.get("stable_for") or 0)
    deadline = time.time() + window
    passed_at = None
    while True:
        checks = _checks(args, state)
        if all(c[1] for c in checks):
            passed_at = passed_at or time.time()
            if time.time() - passed_at >= stable_for:
                return {"ok": True, "checks": [list(c) for c in checks], "procs": state.get("procs", []),
                        "log_size": state.get("log_size")}
        elif passed_at is not None or time.time() >= deadline:
            break
        time.sleep(0.2)
    failed = [c for c in checks if not c[1]]
    return {"ok": False, "checks": [list(c) for c in checks], "failed": [list(c) for c in failed],
            "diagnosis": _diagnose(args, state), "procs": state.get("procs", []),
            "log_tail": _log_tail(args["log"], _launch_offset(args)) if args.get("log") else "",
            "log_size": state.get("log_size")}


# -- kill_old: wait for GPU memory -----------------------------------------------------------
def op_gpu_wait(args):
    deadline = time.time() + float(args["wait"])
    limit = float(args.get("below_mb", 1024))
    while True:
        used = gpu_memory(args.get("gpus"))
        if used is None:
            return {"skipped": True, "msg": "no nvidia-smi on the target: GPU wait skipped"}
        busy = dict((str(k), v) for k, v in used.items() if v >= limit)
        if not busy or time.time() >= deadline:
            return {"busy": busy, "used": dict((str(k), v) for k, v in used.items())}
        time.sleep(0.5)


