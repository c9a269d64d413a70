# opsrunner-agent part 2: launch, verify, clear, file sync, and the dispatcher.
# Protocol: stdin starts with one JSON line {"op": ..., "args": {...}}; what follows is the
# op's payload (a tar stream for "write"). The last stdout line is the JSON reply.
import errno
import glob
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tarfile
import time

SUPERVISOR_BOOT = "import os;exec(os.environ.pop('OPSRUNNER_SUPERVISOR_CODE'))"


def write_atomic(path, data, mode=0o644):
    tmp = "%s.opsrunner-tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, path)


# -- launch_detached -------------------------------------------------------------------------
def op_launch(args):
    pidfile = args.get("pidfile")
    paths = pidfile_paths(pidfile) if pidfile else None
    if pidfile:
        pid, start = read_pidfile(pidfile)
        if pid and start is not None and alive(pid, start):
            return {"changed": False, "pid": pid, "already_running": True, "log": args.get("log")}
    if args.get("check_mode"):
        return {"changed": True, "would_launch": args["argv"]}
    chdir = args.get("chdir")
    if chdir and not os.path.isdir(chdir):
        return {"error": "chdir %s does not exist on the target" % chdir}
    for path in (args.get("log"), pidfile):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
    if paths:
        for key in ("exit", "meta"):
            if os.path.exists(paths[key]):
                os.unlink(paths[key])
    spec = dict(args)
    spec["exit_file"] = paths["exit"] if paths else None
    log_offset = _log_state(args["log"]) or 0 if args.get("log") else 0
    pid, error = _spawn(spec)
    if error:
        return {"error": "could not start %s: %s" % (args["argv"][0], error)}
    p = read_proc(pid)
    if p is None or p.sid != pid:
        return {"error": "job %d is not running in its own session after start" % pid}
    if pidfile:
        write_atomic(paths["meta"], json.dumps({"pid": pid, "start": p.start, "argv": args["argv"],
                                                "log": args.get("log"), "log_offset": log_offset,
                                                "started_at": time.time()}).encode())
        write_atomic(pidfile, ("%d\n" % pid).encode())
    return {"changed": True, "pid": pid, "pgid": p.pgid, "sid": p.sid, "log": args.get("log"),
            "exit_file": spec["exit_file"], "cmdline": p.cmdline}


def _spawn(spec):
    """Fork the supervisor (own session, neutral command line), which forks the job.

    Handshake: the job writes its pid to a close-on-exec pipe after its own setsid();
    EOF on that pipe means exec succeeded. Only then do we return: no sleep, no race
    with an exec session that kills what it leaves behind."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            os.close(r)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.set_inheritable(w, True)
            os.closerange(3, w)
            os.closerange(w + 1, 65536)
            env = dict(os.environ)
            env["OPSRUNNER_SUPERVISOR_CODE"] = SOURCE
            env["OPSRUNNER_SPEC"] = json.dumps(dict(spec, handshake_fd=w))
            os.execve(os.readlink("/proc/self/exe"), ["opsrunner-supervisor", "-c", SUPERVISOR_BOOT], env)
        finally:
            os._exit(127)
    os.close(w)
    data = b""
    deadline = time.time() + 30
    while time.time() < deadline:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(child, os.WNOHANG)
    lines = data.decode("utf-8", "replace").splitlines()
    pid = int(lines[0].split()[1]) if lines and lines[0].startswith("ok ") else None
    errors = [line[4:] for line in lines if line.startswith("err ")]
    if pid is None:
        return None, errors[0] if errors else "supervisor failed before starting the job"
    return pid, (errors[0] if errors else None)


def supervise():
    """Runs as `opsrunner-supervisor`: starts the job, waits for it, records its exit."""
    spec = json.loads(os.environ.pop("OPSRUNNER_SPEC"))
    w = spec["handshake_fd"]
    job = os.fork()
    if job == 0:
        _exec_job(spec, w)
    os.close(w)
    while True:
        try:
            _, status = os.waitpid(job, 0)
            break
        except InterruptedError:
            continue
    if spec.get("exit_file"):
        record = {"pid": job, "ended_at": time.time(), "returncode": None, "signal": None}
        if os.WIFSIGNALED(status):
            record["signal"] = os.WTERMSIG(status)
        else:
            record["returncode"] = os.WEXITSTATUS(status)
        try:
            write_atomic(spec["exit_file"], json.dumps(record).encode())
        except OSError:
            pass


def _exec_job(spec, w):
    try:
        os.setsid()
        if spec.get("umask") is not None:
            os.umask(int(str(spec["umask"]), 8))
        if spec.get("chdir"):
            os.chdir(spec["chdir"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = spec.get("log") or os.devnull
        out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.set_inheritable(w, False)
        os.closerange(3, w)
        os.closerange(w + 1, _max_fd())
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("OPSRUNNER_"))
        env.update(spec.get("env") or {})
        os.write(w, ("ok %d\n" % os.getpid()).encode())
        argv = spec["argv"]
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        try:
            os.write(w, ("err %s\n" % (exc.strerror or exc)).encode())
        except OSError:
            pass
    os._exit(127)


def _max_fd():
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 65536)
    except (ValueError, OSError):
        return 4096


# -- verify ----------------------------------------------------------------------------------
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


# -- clear_cache -----------------------------------------------------------------------------
def _refusal(path, home, pattern):
    real = os.path.normpath(path)
    if not pattern.strip():
        return "empty path"
    if ".." in pattern.split("/"):
        return "path contains '..'"
    if not os.path.isabs(real):
        return "not an absolute path"
    if real == "/":
        return "the filesystem root"
    if home and (real == home or home.startswith(real.rstrip("/") + "/")):
        return "the home directory or one of its parents"
    if real.count("/") < 2:
        return "a top-level directory"
    return None


def _usage(path):
    total, files = 0, 0
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size, 1
    for root, dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def op_clear(args):
    if not os.environ.get("USER"):
        import pwd
        os.environ["USER"] = pwd.getpwuid(os.getuid()).pw_name
    home = os.path.expanduser("~")
    limit = int(args.get("max_matches", 20))
    targets, refused = [], []
    for pattern in args["paths"]:
        expanded = os.path.expandvars(os.path.expanduser(pattern)) if pattern.strip() else pattern
        reason = _refusal(expanded, home, pattern)
        if reason:
            refused.append("%r: %s" % (pattern, reason))
            continue
        matches = sorted(glob.glob(expanded))
        if len(matches) > limit:
            refused.append("%r matches %d entries (more than max_matches=%d)" % (pattern, len(matches), limit))
            continue
        for match in matches:
            reason = _refusal(match, home, match)
            if reason:
                refused.append("%r matched %s: %s" % (pattern, match, reason))
            elif match not in targets:
                targets.append(match)
    if refused:
        return {"error": "refusing to clear: " + "; ".join(refused) + " (nothing was removed)"}
    removed = []
    for path in targets:
        size, files = _usage(path)
        removed.append({"path": path, "bytes": size, "files": files})
        if not args.get("check_mode"):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    return {"changed": bool(removed), "removed": removed, "bytes": sum(r["bytes"] for r in removed)}


# -- deploy_code -----------------------------------------------------------------------------
def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _excluded(rel, patterns):
    import fnmatch
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def op_stat(args):
    """Checksums and modes of the files the controller wants to deploy, and extras under dest."""
    dest = args["dest"]
    files = {}
    for rel in args["files"]:
        path = os.path.join(dest, rel) if rel else dest
        try:
            st = os.stat(path)
        except OSError:
            files[rel] = None
            continue
        if not stat.S_ISREG(st.st_mode):
            files[rel] = {"type": "other"}
            continue
        files[rel] = {"sha256": _sha256(path), "mode": stat.S_IMODE(st.st_mode), "size": st.st_size}
    extra = []
    if args.get("list_extra") and os.path.isdir(dest):
        wanted = set(args["files"])
        for root, dirs, names in os.walk(dest):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), dest)
                if rel not in wanted and not _excluded(rel, args.get("exclude") or []):
                    extra.append(rel)
    return {"files": files, "extra": sorted(extra)}


def op_write(args):
    """Unpack a tar stream from stdin; each file lands atomically (temp file + rename)."""
    dest = args["dest"]
    written, backups = [], []
    stamp = time.strftime("%Y%m%d%H%M%S")
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                continue
            path = os.path.join(dest, member.name) if member.name != "." else dest
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            if args.get("backup") and os.path.isfile(path):
                shutil.copy2(path, "%s.%s~" % (path, stamp))
                backups.append("%s.%s~" % (path, stamp))
            tmp = "%s.opsrunner-tmp-%d" % (path, os.getpid())
            src = tar.extractfile(member)
            with open(tmp, "wb") as fh:
                shutil.copyfileobj(src, fh, 1 << 20)
            os.chmod(tmp, member.mode & 0o7777)
            os.rename(tmp, path)
            written.append(member.name)
    return {"written": written, "backups": backups}


def op_delete(args):
    dest = args["dest"]
    removed = []
    for rel in args["files"]:
        if rel.startswith("/") or ".." in rel.split("/"):
            continue
        try:
            os.unlink(os.path.join(dest, rel))
            removed.append(rel)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return {"removed": removed}


def op_read(args):
    out = {}
    for path in args["paths"]:
        try:
            with open(path, "rb") as fh:
                data = fh.read(int(args.get("limit", 262144)) + 1)
        except OSError:
            out[path] = None
            continue
        out[path] = None if len(data) > int(args.get("limit", 262144)) or b"\0" in data \
            else data.decode("utf-8", "replace")
    return {"contents": out}


# -- dispatcher ------------------------------------------------------------------------------
OPS = {"kill": op_kill, "select": op_select, "launch": op_launch, "verify": op_verify,
       "gpu_wait": op_gpu_wait, "clear": op_clear, "stat": op_stat, "write": op_write,
       "delete": op_delete, "read": op_read}


PATH_ARGS = ("pidfile", "log", "chdir", "dest")


def _own_source():
    with open("/proc/self/cmdline", "rb") as fh:
        argv = fh.read().split(b"\0")
    return argv[argv.index(b"-c") + 1].decode("utf-8")  # works with or without -S before -c


def main():
    if "OPSRUNNER_SPEC" in os.environ:
        supervise()
        return
    global SOURCE
    SOURCE = _own_source()
    line = sys.stdin.buffer.readline()
    request = json.loads(line.decode("utf-8"))
    args = request.get("args") or {}
    for key in PATH_ARGS:
        if isinstance(args.get(key), str):
            args[key] = os.path.expanduser(args[key])
    try:
        reply = OPS[request["op"]](args)
    except Exception as exc:  # reported to the controller as the task's failure message
        reply = {"error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write("\n" + json.dumps(reply) + "\n")
    sys.stdout.flush()


SOURCE = ""
main()
