# opsrunner-agent part 3: launch_detached (a supervisor in its own session starts the job).
import _signal as signal  # the C module: `signal` imports enum (~3 ms at every agent start)
import os
import select
import time

from .atomic import create_temp_beside, write_atomic
from .jobfiles import boot_id, pidfile_paths, read_pidfile
from .procs import alive, read_proc, send_signal
from .programs import resolve_program
from .reads import check_regular, file_size, read_json, tail_lines
from .watchdog import open_pidfd
from .wire import json_dumps

SUPERVISOR_BOOT = ("import os,marshal,binascii;"
                   "exec(marshal.loads(binascii.a2b_base64(os.environ.pop('OPSRUNNER_SUPERVISOR_CODE'))))")


def op_launch(args):
    pidfile = args.get("pidfile")
    paths = pidfile_paths(pidfile) if pidfile else None
    if args.get("chdir") and args.get("log") and not os.path.isabs(args["log"]):
        args["log"] = os.path.join(args["chdir"], args["log"])  # the job opens it after chdir
    if paths:
        for key, what in (("pid", "pidfile"), ("exit", "exit file"), ("meta", "launch record")):
            problem = check_regular(paths[key], what)
            if problem:
                return {"error": problem}
        pid, start = read_pidfile(pidfile)
        stopping = set(args.get("would_stop") or ())  # check mode: an earlier task would kill these
        if pid and start is not None and alive(pid, start) and pid not in stopping:
            return {"changed": False, "pid": pid, "already_running": True, "log": args.get("log")}
    check = bool(args.get("check_mode"))
    problem, program = preflight(args, paths, check)
    if check:
        if problem:
            return {"error": problem}
        return {"changed": True, "would_launch": args["argv"], "program": program}
    log_offset = (file_size(args["log"]) or 0) if args.get("log") else 0
    if paths:
        for key in ("exit", "meta"):
            if os.path.lexists(paths[key]):
                os.unlink(paths[key])
    record = {"pid": None, "start": None, "argv": args["argv"], "log": args.get("log"),
              "log_offset": log_offset, "started_at": time.time(), "boot_id": boot_id()}
    if problem:
        return _failed_launch(paths, record, problem)
    spec = dict(args)
    spec["exit_file"] = paths["exit"] if paths else None
    pid, error = _spawn(spec)
    record["supervisor"] = spec.get("supervisor")
    if error:
        return _failed_launch(paths, record, "could not start the job: %s" % error)
    return _launched(args, paths, record, pid)


def _launched(args, paths, record, pid):
    """Record the launch; a job that already ended is reported with its exit status."""
    p = _settle(pid)
    ended = None
    if p is None or p.state == "Z" or p.sid != pid:
        ended = _await_exit(paths["exit"], pid) if paths else {"pid": pid, "unknown": True}
    record["pid"] = pid
    record["start"] = p.start if p is not None and p.sid == pid else (ended or {}).get("start")
    if paths:
        try:
            write_atomic(paths["meta"], json_dumps(record).encode())
            write_atomic(paths["pid"], ("%d\n" % pid).encode())
        except OSError as exc:
            if ended is None:
                send_signal(-pid, signal.SIGKILL)  # never leave a job that nothing tracks
            return {"error": "cannot write %s: %s (errno %d); the job (pid %d) was killed"
                    % (paths["pid"], exc.strerror, exc.errno, pid)}
    reply = {"changed": True, "pid": pid, "log": args.get("log"),
             "exit_file": paths["exit"] if paths else None}
    if ended is not None:
        reply["exited"] = ended
        if args.get("log"):
            reply["log_tail"] = tail_lines(args["log"], record["log_offset"])
        return reply
    reply.update({"pgid": p.pgid, "sid": p.sid, "cmdline": p.cmdline})
    return reply


def _settle(pid, wait_s=0.25):
    """The job a moment after its exec: one that fails at once (bad arguments, missing file)
    is then reported with its exit status instead of as launched. Woken by a pidfd where
    there is one (~5 ms of CPU less than reading /proc every 10 ms, on every host). A pidfd
    is readable as its process exits, a moment before /proc shows the zombie (procs.py's
    _wait_gone): /proc is then read again every ms until it does."""
    deadline = time.time() + wait_s
    exit_fd = open_pidfd(pid)  # native.py part
    if exit_fd is not None:
        try:
            poller = select.poll()
            poller.register(exit_fd, select.POLLIN)
            poller.poll(wait_s * 1000)  # until the job exits, or wait_s
        finally:
            os.close(exit_fd)
    while True:
        p = read_proc(pid)
        if p is None or p.state == "Z" or p.sid != pid or time.time() >= deadline:
            return p
        time.sleep(0.01 if exit_fd is None else 0.001)


def _await_exit(exit_file, pid, wait_s=5.0):
    """The supervisor's exit record of a job that ended at once (it lands within ms)."""
    deadline = time.time() + wait_s
    while True:
        record = read_json(exit_file, "exit file")
        if record and record.get("pid") == pid:
            return record
        if time.time() >= deadline:
            return {"pid": pid, "unknown": True}
        time.sleep(0.01)


def _failed_launch(paths, record, problem):
    """The launch record survives a failed launch, so later checks read only this run's log."""
    if paths:
        record["error"] = problem
        try:
            if os.path.lexists(paths["pid"]):
                os.unlink(paths["pid"])  # names a job already stopped: it must not be trusted
            write_atomic(paths["meta"], json_dumps(record).encode())
        except OSError:
            pass
    return {"error": problem}


def _writable_dir(path, check):
    """None when files can be created in directory `path` (created unless check), else the error."""
    probe = path
    while probe and not os.path.exists(probe):
        probe = os.path.dirname(probe.rstrip("/")) or "/"
    if not os.path.isdir(probe):
        return "%s is not a directory" % probe
    if check:
        if os.access(probe, os.W_OK | os.X_OK):
            return None
        return "%s is not writable" % (probe if probe == path else "%s (to create %s)" % (probe, path))
    try:
        os.makedirs(path, exist_ok=True)
        fd, name = create_temp_beside(os.path.join(path, ".opsrunner-probe"))
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return "%s: %s (errno %d)" % (exc.filename or path, exc.strerror, exc.errno)
    return None


def _would_exist(path, args):
    """Check mode: an earlier task (deploy_code) would have created this path or one below it."""
    path = os.path.abspath(path).rstrip("/")
    for made in args.get("would_exist") or ():
        made = os.path.abspath(os.path.expanduser(made)).rstrip("/")
        if made == path or made.startswith(path + "/"):
            return True
    return False


def preflight(args, paths, check):
    """(why the job cannot start or None, the resolved program): checked before anything starts."""
    chdir = args.get("chdir")
    if chdir and not os.path.isdir(chdir) and not (check and _would_exist(chdir, args)):
        return "chdir %s does not exist on the target" % chdir, None
    log = args.get("log")
    if log and log != os.devnull:
        problem = check_regular(log, "log")
        if problem:
            return problem, None
        folder = os.path.dirname(os.path.abspath(log))
        why = _writable_dir(folder, check)
        if why:
            return "cannot open the log %s: directory %s" % (log, why), None
        if check and os.path.exists(log) and not os.access(log, os.W_OK):
            return "cannot open the log %s: Permission denied" % log, None
        if not check:
            try:
                os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644))
            except OSError as exc:
                return "cannot open the log %s: %s (errno %d)" % (log, exc.strerror, exc.errno), None
    if paths:
        why = _writable_dir(os.path.dirname(os.path.abspath(paths["pid"])), check)
        if why:
            return "cannot write the pidfile %s: %s; the job was not started" % (paths["pid"], why), None
    problem, program = resolve_program(args["argv"][0], args.get("env") or {}, chdir)
    if problem and check and "/" in args["argv"][0] and _would_exist(
            os.path.join(chdir or os.getcwd(), args["argv"][0]), args):
        return None, args["argv"][0]  # deployed by an earlier task: it will exist
    return problem, program


def supervisor_code():
    """The supervisor module's code, marshalled (base64) for OPSRUNNER_SUPERVISOR_CODE. Its
    bytecode comes from this package's cache (the module's loader), so no launch compiles it;
    its interpreter is this one (/proc/self/exe), so the bytecode fits it. A cold Python that
    unmarshals it spends ~3.5 ms of CPU less than one that parses the source, at every launch."""
    import binascii
    import marshal

    from . import supervisor
    code = supervisor.__spec__.loader.get_code(supervisor.__name__)
    return binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii")


def _supervisor_argv(env):
    """A command line that names no job: the supervisor part's code comes in env."""
    env["OPSRUNNER_SUPERVISOR_CODE"] = supervisor_code()
    return ["opsrunner-supervisor", "-S", "-c", SUPERVISOR_BOOT]


def _spawn(spec):
    """Start the supervisor (own session, neutral command line), which forks the job.

    A new Python running only the supervisor part (supervisor.py), not a plain fork of
    this worker: a fork would share the agent's pages
    copy-on-write, and its first writes after the job's death would need new memory - in
    a memory cgroup the OOM killer just emptied, that can get the supervisor killed before
    it records the exit (seen in the OOM test).

    Everything it needs (its spec, environment and code) is built here, before the fork:
    a child that built them in its copy of this Python cost ~6 ms of CPU more per launch, in
    page copies and its own work. Not posix_spawn: glibc's leaves its internal signals (32,
    33) ignored in the child, and the job would inherit that. The child inherits 0, 1, 2
    (/dev/null) and the handshake pipe alone: every other descriptor of this worker is
    close-on-exec (server.py).

    Handshake: the job writes its pid to a close-on-exec pipe after its own setsid();
    EOF on that pipe means exec succeeded. Only then do we return: no sleep, no race
    with an exec session that kills what it leaves behind."""
    import binascii
    import marshal
    r, w = os.pipe()
    env = dict(os.environ)
    # base64, not JSON: the supervisor imports no json. An environment string may hold
    # 128 KiB (MAX_ARG_STRLEN): ~96 KiB of spec (the job's argv and env).
    env["OPSRUNNER_SPEC"] = binascii.b2a_base64(marshal.dumps(dict(spec, handshake_fd=w)),
                                                newline=False).decode("ascii")
    argv, exe = _supervisor_argv(env), os.readlink("/proc/self/exe")
    null = os.open(os.devnull, os.O_RDWR)
    try:
        child = os.fork()
        if child == 0:
            try:
                os.setsid()
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.set_inheritable(w, True)
                os.execve(exe, argv, env)
            finally:
                os._exit(127)
    except OSError as exc:
        os.close(r)
        return None, "cannot start the supervisor: %s" % (exc.strerror or exc)
    finally:
        os.close(null)
        os.close(w)
    sup = read_proc(child)  # recorded: verify waits for an exit record only while it lives
    spec["supervisor"] = [child, sup.start if sup is not None else None]
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
