# opsrunner-agent part 2: launch_detached (a supervisor in its own session starts the job).
import json
import os
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
                                                "started_at": time.time(), "boot_id": boot_id()}).encode())
        write_atomic(pidfile, ("%d\n" % pid).encode())
    return {"changed": True, "pid": pid, "pgid": p.pgid, "sid": p.sid, "log": args.get("log"),
            "exit_file": spec["exit_file"], "cmdline": p.cmdline}


def _supervisor_argv(env):
    """A command line that names no job: imported from the agent cache, or code from env."""
    if "__file__" in globals():
        folder, name = os.path.split(__file__)
        boot = "import sys;sys.path.insert(0,%r);import %s as agent;agent.main()" % (folder, name[:-3])
        return ["opsrunner-supervisor", "-S", "-c", boot]
    env["OPSRUNNER_SUPERVISOR_CODE"] = SOURCE
    return ["opsrunner-supervisor", "-S", "-c", SUPERVISOR_BOOT]


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
            env["OPSRUNNER_SPEC"] = json.dumps(dict(spec, handshake_fd=w))
            os.execve(os.readlink("/proc/self/exe"), _supervisor_argv(env), env)
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


