# opsrunner-agent part 4: verify (the verdict, the diagnosis, the status) and the GPU wait of kill_old.
import errno
import os
import time

from .diagnose import job_status
from .gpus import gpu_memory
from .jobfiles import exit_record, launch_offset, read_pidfile
from .procs import alive, read_proc, select, table_for
from .reads import REGEX_WINDOW, NotRegular, check_regular, read_window, tail_lines

POLL_S = 0.2


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


def _log_checks(args, state, out):
    log = args["log"]
    problem = check_regular(log, "log")
    if problem:
        raise NotRegular(problem)
    now = time.time()
    try:
        st = os.stat(log)
    except OSError as exc:
        st = None
        state["log_error"] = None if exc.errno == errno.ENOENT else "%s (errno %d)" % (exc.strerror, exc.errno)
    size = st.st_size if st else None
    state["log_size"] = size
    if size is not None:
        offset = state["offset"] if state["offset"] <= size else 0  # a truncated log starts over
        seen = state.get("seen_size")
        if seen is not None and size > seen:
            state["grew_at"] = now
        state["seen_size"] = size
        state["mtime"] = st.st_mtime
        if size > offset:  # written by this run: its last write is when it last grew
            state["grew_at"] = max(state.get("grew_at") or 0, min(st.st_mtime, now))
    if args.get("log_exists", True):
        out.append(("log_exists", size is not None, "exists", "missing" if size is None else "exists"))
    if args.get("log_min_bytes") is not None:
        out.append(("log_min_bytes", (size or 0) >= int(args["log_min_bytes"]),
                    ">= %s bytes" % args["log_min_bytes"], "%s bytes" % (size or 0)))
    if args.get("log_grows"):
        limit = float(args["log_grows"])
        grew_at = state.get("grew_at")
        ok = size is not None and grew_at is not None and now - grew_at <= limit
        if size is None:
            actual = "no log"
        elif grew_at is None:
            actual = "not grown since the launch (%d bytes)" % size
        else:
            actual = "last grew %.1fs ago (%d bytes)" % (now - grew_at, size)
        out.append(("log_grows", ok, "grows within every %ss" % args["log_grows"], actual))
    if args.get("log_regex") or args.get("log_not_regex"):
        _regex_checks(args, state, size, out)


def _regex_checks(args, state, size, out):
    """Only this run's part of the log, and at most its last REGEX_WINDOW bytes."""
    if state.get("text_size") != size:
        data, _ = read_window(args["log"], state["offset"], REGEX_WINDOW)
        state["text"] = (data or b"").decode("utf-8", "replace")
        state["text_size"] = size
    text = state["text"]
    import re  # only for log regexes: not loaded by every verify
    if args.get("log_regex"):
        found = re.search(args["log_regex"], text, re.M) is not None
        out.append(("log_regex", found, "log matches /%s/" % args["log_regex"], "matched" if found else "no match"))
    if args.get("log_not_regex"):
        m = re.search(args["log_not_regex"], text, re.M)
        if m:  # the whole line, for a diagnosis of a job that lives on after it
            state["fail_line"] = text[text.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0][:300]
        out.append(("log_not_regex", m is None, "log free of /%s/" % args["log_not_regex"],
                    "found %r" % m.group(0) if m else "absent"))


def _checks(args, state):
    """Evaluate every requested check once; returns a list of (name, ok, expected, actual)."""
    out = []
    sel_args = dict(args)
    if args.get("pattern"):
        sel_args.pop("pidfile", None)  # count what the pattern sees; the pidfile serves the diagnosis
    procs = table_for(sel_args, tree=False)
    _, main = select(sel_args, procs, tree=False)
    state["procs"] = [procs[p].as_dict() for p in main]
    count = len(main)
    if args.get("processes") is not None:
        out.append(("processes", count == int(args["processes"]), "exactly %s" % args["processes"], count))
    if args.get("min_processes") is not None:
        out.append(("min_processes", count >= int(args["min_processes"]), ">= %s" % args["min_processes"], count))
    if args.get("log"):
        _log_checks(args, state, out)
    if args.get("port") is not None:
        up = _listening(args["port"])
        out.append(("port", up, "port %s listening" % args["port"], "listening" if up else "not listening"))
    if args.get("gpu_min_memory_mb") is not None:
        used = state["gpu_memory_mb"] = gpu_memory(args.get("gpus"))
        ok = bool(used) and all(mb >= float(args["gpu_min_memory_mb"]) for mb in used.values())
        out.append(("gpu_min_memory_mb", ok, ">= %s MB on each GPU" % args["gpu_min_memory_mb"],
                    "no nvidia-smi" if used is None else used))
    return out


def _ended(args, state):
    """True when polling cannot change the verdict: the pidfile's job is gone and nothing
    matching the pattern remains (its exit is recorded, or it vanished)."""
    if not args.get("pidfile"):
        return False
    pid, start = read_pidfile(args["pidfile"])
    if pid is None:
        meta = state.get("meta")
        return bool(meta and meta.get("error"))  # the latest launch failed: nothing will start
    return not alive(pid, start) and not state.get("procs")


def _await_exit_record(args, state, hard, wait_s=30.0):
    """A failing verdict on a supervised job that is still dying waits for its exit record.

    A process being torn down (an OOM-killed job freeing its memory) has no cmdline, so no
    check sees it; its supervisor writes the exit status within ms of reaping it. Judging in
    that gap would report "no matching process" instead of the signal that ended the job.
    The teardown of a large job (its memory, a GPU context) can take seconds, so the wait
    allows 30 s; it ends when the record comes, when the supervisor is gone (none will come)
    or at the task's deadline. A launch record without a supervisor (none writes a record)
    is not waited for. Returns True when it waited (the checks are then taken again)."""
    sup = (state.get("meta") or {}).get("supervisor")
    if not args.get("pidfile") or not (isinstance(sup, list) and len(sup) == 2):
        return False
    end = min(time.time() + wait_s, hard if hard is not None else float("inf"))
    waited = False
    while time.time() < end:
        pid, start = read_pidfile(args["pidfile"])
        if pid is None or exit_record(args["pidfile"], pid):
            return waited
        p = read_proc(pid)
        if p is not None and p.state != "Z" and p.cmdline and (start is None or p.start == start):
            return waited  # really running: the verdict stands as taken
        if p is not None and start is not None and p.start != start:
            return waited  # the pid was reused: the job is long gone
        if not alive(sup[0], sup[1]):
            return waited  # its supervisor is gone too: no record will come
        waited = True
        time.sleep(0.05)
    return waited


def _fail_regex_matched(checks):
    return any(c[0] == "log_not_regex" and not c[1] for c in checks)


def _fail_grace(args, state, checks, hard):
    """After fail_regex matched, wait up to `fail_grace` seconds for the job to exit.

    The match can come while the job is still writing its traceback: judged at that instant,
    a crashing job is "running" on a busy machine and "exited with code 1" on an idle one.
    Waiting for the exit (bounded) makes the diagnosis the same under any load: the exit
    code or signal, or a job still alive after the grace. Returns True when it waited."""
    if not _fail_regex_matched(checks):
        return False
    if args.get("pidfile"):
        pid, start = read_pidfile(args["pidfile"])
        jobs = [(pid, start)] if pid else []
    else:
        jobs = [(p["pid"], None) for p in state.get("procs", [])]
    grace = float(args.get("fail_grace", 5) or 0)
    end = min(time.time() + grace, hard if hard is not None else float("inf"))
    waited = False
    while time.time() < end and any(alive(pid, start) for pid, start in jobs):
        waited = True
        time.sleep(0.02)
    state["fail_grace"] = grace
    return waited


def _stable_window(args):
    """How long the checks must keep passing. A hang shows only after `log_grows` seconds
    without growth, so a job that hangs during `stable_for` is seen only that much later:
    with log_grows, the window is stable_for + log_grows, and growth that happened before
    the checks first passed never counts as the job being healthy through the window."""
    return float(args.get("stable_for") or 0) + float(args.get("log_grows") or 0)


def op_verify(args):
    """Poll until every check passes (up to `within`), then keep them passing through the
    stable window (_stable_window).

    Stops at once when the outcome is final (the job ended, fail_regex matched), and at
    `budget` seconds (the task timeout, minus the controller's margin) with the verdict so far."""
    t0 = time.time()
    state = {}
    state["meta"], state["offset"] = launch_offset(args)
    deadline = t0 + max(float(args.get("within") or 0), float(args.get("log_grows") or 0))
    stable_for = _stable_window(args)
    hard = t0 + float(args["budget"]) if args.get("budget") else None
    passed_at, cut = None, False
    while True:
        checks = _checks(args, state)
        now = time.time()
        if all(c[1] for c in checks):
            passed_at = passed_at or now
            if now - passed_at >= stable_for:
                return {"ok": True, "checks": [list(c) for c in checks], "procs": state.get("procs", []),
                        "log_size": state.get("log_size"), "status": job_status(args, state, checks)}
        elif passed_at is not None or now >= deadline or _fail_regex_matched(checks) or _ended(args, state):
            break
        if hard is not None and now + POLL_S >= hard:
            cut = True
            break
        time.sleep(POLL_S)
    waited = _fail_grace(args, state, checks, hard)
    if _await_exit_record(args, state, hard) or waited:
        checks = _checks(args, state)
    failed = [c for c in checks if not c[1]]
    status = job_status(args, state, checks)
    return {"ok": False, "checks": [list(c) for c in checks], "failed": [list(c) for c in failed],
            "diagnosis": status.pop("diagnosis"), "procs": state.get("procs", []), "cut_short": cut,
            "log_tail": tail_lines(args["log"], state["offset"]) if args.get("log") else "",
            "log_size": state.get("log_size"), "status": status, "waited_s": round(time.time() - t0, 2)}

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


