# opsrunner-agent part 4: verify (the verdict, the diagnosis, the status) and the GPU wait of kill_old.
from __future__ import annotations

import errno
import os
import time

from .diagnose import VerifyState, job_status
from .goodrun import record_good
from .gpus import gpu_memory
from .jobfiles import exit_record, launch_offset, read_pidfile
from .procs import alive, read_proc, select, table_for
from .reads import REGEX_WINDOW, NotRegular, check_regular, read_window, tail_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_jobs import Check, GpuWaitArgs, GpuWaitReply, VerifyArgs, VerifyReply

POLL_S = 0.2


def _listening(port: int) -> bool:
    hexport = f":{int(port):04X}"
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


def _log_size(log: str, state: VerifyState) -> tuple[int | None, float]:
    """(the log's size, None when absent; when it was looked at); notes when this run's log last grew."""
    problem = check_regular(log, "log")
    if problem:
        raise NotRegular(problem)
    now = time.time()
    try:
        st = os.stat(log)
    except OSError as exc:
        state.log_error = None if exc.errno == errno.ENOENT else f"{exc.strerror} (errno {exc.errno})"
        state.log_size = None
        return None, now
    size = state.log_size = st.st_size
    offset = state.offset if state.offset <= size else 0  # a truncated log starts over
    seen = state.seen_size
    if seen is not None and size > seen:
        state.grew_at = now
    state.seen_size = size
    state.mtime = st.st_mtime
    if size > offset:  # written by this run: its last write is when it last grew
        state.grew_at = max(state.grew_at or 0, min(st.st_mtime, now))
    return size, now


def _log_checks(args: VerifyArgs, log: str, state: VerifyState, out: list[Check]) -> None:
    size, now = _log_size(log, state)
    if args.get("log_exists", True):
        out.append(("log_exists", size is not None, "exists", "missing" if size is None else "exists"))
    min_bytes = args.get("log_min_bytes")
    if min_bytes is not None:
        out.append(("log_min_bytes", (size or 0) >= int(min_bytes), f">= {min_bytes} bytes",
                    "no log" if size is None else f"{size} bytes"))
    grows = args.get("log_grows")
    if grows:
        grew_at = state.grew_at
        ok = size is not None and grew_at is not None and now - grew_at <= float(grows)
        if size is None:
            actual = "no log"
        elif grew_at is None:
            actual = f"not grown since the launch ({size} bytes)"
        else:
            actual = f"last grew {now - grew_at:.1f}s ago ({size} bytes)"
        out.append(("log_grows", ok, f"grows within every {grows}s", actual))
    if args.get("log_regex") or args.get("log_not_regex"):
        _regex_checks(args, log, state, size, out)


def _regex_checks(args: VerifyArgs, log: str, state: VerifyState, size: int | None, out: list[Check]) -> None:
    """Only this run's part of the log, and at most its last REGEX_WINDOW bytes."""
    if state.text_size != size:
        data, _ = read_window(log, state.offset, REGEX_WINDOW)
        state.text = (data or b"").decode("utf-8", "replace")
        state.text_size = size
    text = state.text
    import re  # only for log regexes: not loaded by every verify
    wanted, unwanted = args.get("log_regex"), args.get("log_not_regex")
    if wanted:
        found = re.search(wanted, text, re.M) is not None
        out.append(("log_regex", found, f"log matches /{wanted}/", "matched" if found else "no match"))
    if unwanted:
        m = re.search(unwanted, text, re.M)
        if m:  # the whole line, for a diagnosis of a job that lives on after it
            state.fail_line = text[text.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0][:300]
        out.append(("log_not_regex", m is None, f"log free of /{unwanted}/",
                    f"found {m.group(0)!r}" if m else "absent"))


def _job_check(pidfile: str, by_pattern: bool, count: int) -> Check:
    """A verify that names a pidfile and states no count wants its job running (`processes: 0`
    says it must be stopped): without this a job that exited or never started passed."""
    if by_pattern:  # the pattern's processes were counted: the pidfile's job is looked at itself
        pid, start = read_pidfile(pidfile)
        up = pid is not None and alive(pid, start)
    else:
        up = count > 0  # select() counted the pidfile's pid: alive and the launched job
    return ("job", up, f"running (the pid in {pidfile})", "running" if up else "not running")


def _checks(args: VerifyArgs, state: VerifyState) -> list[Check]:
    """Evaluate every requested check once; returns a list of (name, ok, expected, actual)."""
    out: list[Check] = []
    sel_args = args.copy()
    if args.get("pattern"):
        sel_args.pop("pidfile", None)  # count what the pattern sees; the pidfile serves the diagnosis
    procs = table_for(sel_args, tree=False)
    _, main = select(sel_args, procs, tree=False)
    state.procs = [procs[p].as_dict() for p in main]
    count = len(main)
    processes, min_processes = args.get("processes"), args.get("min_processes")
    if processes is not None:
        out.append(("processes", count == int(processes), f"exactly {processes}", count))
    if min_processes is not None:
        out.append(("min_processes", count >= int(min_processes), f">= {min_processes}", count))
    if processes is None and min_processes is None and args.get("pidfile"):
        out.append(_job_check(args["pidfile"], bool(args.get("pattern")), count))
    log = args.get("log")
    if log:
        _log_checks(args, log, state, out)
    port, min_mb = args.get("port"), args.get("gpu_min_memory_mb")
    if port is not None:
        up = _listening(port)
        out.append(("port", up, f"port {port} listening", "listening" if up else "not listening"))
    if min_mb is not None:
        used = state.gpu_memory_mb = gpu_memory(args.get("gpus"))
        state.gpu_read = True
        ok = bool(used) and all(mb >= float(min_mb) for mb in (used or {}).values())
        out.append(("gpu_min_memory_mb", ok, f">= {min_mb} MB on each GPU", "no nvidia-smi" if used is None else used))
    return out


def _ended(args: VerifyArgs, state: VerifyState) -> bool:
    """True when polling cannot change the verdict: the pidfile's job is gone and nothing
    matching the pattern remains (its exit is recorded, or it vanished)."""
    pidfile = args.get("pidfile")
    if not pidfile:
        return False
    pid, start = read_pidfile(pidfile)
    if pid is None:
        meta = state.meta
        return bool(meta and meta.get("error"))  # the latest launch failed: nothing will start
    return not alive(pid, start) and not state.procs


def _await_exit_record(args: VerifyArgs, state: VerifyState, hard: float | None, wait_s: float = 30.0) -> bool:
    """A failing verdict on a supervised job that is still dying waits for its exit record.

    A process being torn down (an OOM-killed job freeing its memory) has no cmdline, so no
    check sees it; its supervisor writes the exit status within ms of reaping it. Judging in
    that gap would report "no matching process" instead of the signal that ended the job.
    The teardown of a large job (its memory, a GPU context) can take seconds, so the wait
    allows 30 s; it ends when the record comes, when the supervisor is gone (none will come)
    or at the task's deadline. A launch record without a supervisor (none writes a record)
    is not waited for. Returns True when it waited (the checks are then taken again)."""
    sup = (state.meta or {}).get("supervisor")
    pidfile = args.get("pidfile")
    if not pidfile or not (isinstance(sup, list) and len(sup) == 2 and sup[0] is not None):
        return False
    sup_pid, sup_start = sup[0], sup[1]
    end = min(time.time() + wait_s, hard if hard is not None else float("inf"))
    waited = False
    while time.time() < end:
        pid, start = read_pidfile(pidfile)
        if pid is None or exit_record(pidfile, pid):
            return waited
        p = read_proc(pid)
        if p is not None and p.state != "Z" and p.cmdline and (start is None or p.start == start):
            return waited  # really running: the verdict stands as taken
        if p is not None and start is not None and p.start != start:
            return waited  # the pid was reused: the job is long gone
        if not alive(sup_pid, sup_start):
            return waited  # its supervisor is gone too: no record will come
        waited = True
        time.sleep(0.05)
    return waited


def _fail_regex_matched(checks: list[Check]) -> bool:
    return any(c[0] == "log_not_regex" and not c[1] for c in checks)


def _fail_grace(args: VerifyArgs, state: VerifyState, checks: list[Check], hard: float | None) -> bool:
    """After fail_regex matched, wait up to `fail_grace` seconds for the job to exit.

    The match can come while the job is still writing its traceback: judged at that instant,
    a crashing job is "running" on a busy machine and "exited with code 1" on an idle one.
    Waiting for the exit (bounded) makes the diagnosis the same under any load: the exit
    code or signal, or a job still alive after the grace. Returns True when it waited."""
    if not _fail_regex_matched(checks):
        return False
    pidfile = args.get("pidfile")
    jobs: list[tuple[int, int | None]]
    if pidfile:
        pid, start = read_pidfile(pidfile)
        jobs = [(pid, start)] if pid else []
    else:
        jobs = [(p["pid"], None) for p in state.procs]
    grace = float(args.get("fail_grace", 5) or 0)
    end = min(time.time() + grace, hard if hard is not None else float("inf"))
    waited = False
    while time.time() < end and any(alive(pid, start) for pid, start in jobs):
        waited = True
        time.sleep(0.02)
    state.fail_grace = grace
    return waited


def _stable_window(args: VerifyArgs) -> float:
    """How long the checks must keep passing. A hang shows only after `log_grows` seconds
    without growth, so a job that hangs during `stable_for` is seen only that much later:
    with log_grows, the window is stable_for + log_grows, and growth that happened before
    the checks first passed never counts as the job being healthy through the window."""
    return float(args.get("stable_for") or 0) + float(args.get("log_grows") or 0)


def op_verify(args: VerifyArgs) -> VerifyReply:
    """Poll until every check passes (up to `within`), then keep them passing through the
    stable window (_stable_window).

    Stops at once when the outcome is final (the job ended, fail_regex matched), and at
    `budget` seconds (the task timeout, minus the controller's margin) with the verdict so far.
    A check is a tuple here and a JSON array [name, ok, expected, actual] on the wire."""
    t0 = time.time()
    state = VerifyState(*launch_offset(args.get("pidfile"), args.get("log")))
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
                return _passed(args, state, checks)
        elif passed_at is not None or now >= deadline or _fail_regex_matched(checks) or _ended(args, state):
            break
        if hard is not None and now + POLL_S >= hard:
            cut = True
            break
        time.sleep(POLL_S)
    waited = _fail_grace(args, state, checks, hard)
    if _await_exit_record(args, state, hard) or waited:
        checks = _checks(args, state)
    log = args.get("log")
    status = job_status(args, state, checks)
    return {"ok": False, "checks": checks, "failed": [c for c in checks if not c[1]],
            "diagnosis": status.pop("diagnosis"), "procs": state.procs, "cut_short": cut,
            "log_tail": tail_lines(log, state.offset) if log else "",
            "log_size": state.log_size, "status": status, "waited_s": round(time.time() - t0, 2)}

def _passed(args: VerifyArgs, state: VerifyState, checks: list[Check]) -> VerifyReply:
    """The verdict ok; with record_good, the pidfile's launch is the job's last good run now."""
    reply: VerifyReply = {"ok": True, "checks": checks, "procs": state.procs, "log_size": state.log_size,
                          "status": job_status(args, state, checks)}
    pidfile = args.get("pidfile")
    if args.get("record_good") and pidfile:
        good = record_good(pidfile, args)  # with the checks it passed, for a rollback to verify it with
        if good is not None:
            reply["good"] = good
    return reply


# -- kill_old: wait for GPU memory -----------------------------------------------------------
def op_gpu_wait(args: GpuWaitArgs) -> GpuWaitReply:
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
