# opsrunner-agent part 3: launch_detached (a supervisor in its own session starts the job).
from __future__ import annotations

import errno
import os
import select
import time

from .atomic import create_temp_beside, write_atomic
from .jobfiles import (
    SUPERVISOR_NAME,
    as_exit_record,
    boot_id,
    launch_record,
    live_supervisors,
    pidfile_paths,
    read_pidfile,
)
from .procs import alive, read_proc, send_signal
from .programs import resolve_program
from .reads import check_regular, file_size, read_json, tail_lines
from .releases import resolve_release_link
from .watchdog import PR_SET_CHILD_SUBREAPER, ignored, load_prctl, open_pidfd
from .wire import json_dumps

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from _ctypes import CFuncPtr
    from typing import NoReturn

    from .jobfiles import JobPaths
    from .procs import Proc
    from .protocol_jobs import ExitRecord, LaunchArgs, LaunchRecord, LaunchReply
else:
    import _signal as signal  # the C module: `signal` imports enum (~3 ms at every agent start)

#: The launch record holds the job's environment: readable by its owner only.
RECORD_MODE = 0o600
SUPERVISOR_BOOT = ("import os,marshal,binascii;"
                   "exec(marshal.loads(binascii.a2b_base64(os.environ.pop('OPSRUNNER_SUPERVISOR_CODE'))))")


def op_launch(args: LaunchArgs) -> LaunchReply:
    pidfile = args.get("pidfile")
    paths = pidfile_paths(pidfile) if pidfile else None
    release, problem = resolve_release_link(args)  # before all else: argv and chdir name the real release
    if problem:
        return {"error": problem}
    if args.get("chdir") and args.get("log") and not os.path.isabs(args["log"]):
        args["log"] = os.path.join(args["chdir"], args["log"])  # the job opens it after chdir
    running: int | None = None
    if paths:
        for path, what in ((paths["pid"], "pidfile"), (paths["exit"], "exit file"), (paths["meta"], "launch record")):
            problem = check_regular(path, what)
            if problem:
                return {"error": problem}
        running = _live_job(paths["pid"])
        stopping = set(args.get("would_stop") or ())  # check mode: an earlier task would kill these
        if running and running not in stopping and not args.get("check_only"):
            return {"changed": False, "pid": running, "already_running": True, "log": args.get("log")}
    check = bool(args.get("check_mode") or args.get("check_only"))
    problem, program = preflight(args, paths, check)
    if args.get("check_only"):  # the checks alone, before a stop: what runs now is the stop's to end
        return _checked(problem, program, running)
    if check:
        if problem:
            return {"error": problem}
        return {"changed": True, "would_launch": args["argv"], "program": program}
    log_offset = (file_size(args["log"]) or 0) if args.get("log") else 0
    earlier = _earlier_supervisors(paths["pid"]) if paths else []
    if paths and os.path.lexists(paths["exit"]):
        os.unlink(paths["exit"])
    # The exact launch (env and chdir too), so a rollback can start it again as it was; the
    # file is 0600 as the environment may hold secrets.
    record: LaunchRecord = {"pid": None, "start": None, "argv": args["argv"], "log": args.get("log"),
                            "log_offset": log_offset, "started_at": time.time(), "boot_id": boot_id(),
                            "env": dict(args.get("env") or {}), "chdir": args.get("chdir"),
                            "umask": args.get("umask")}
    record.update(release)
    if earlier:
        record["earlier_supervisors"] = earlier
    if problem:
        return _failed_launch(paths, record, problem)
    if paths:
        failed = _record_launching(paths, record)
        if failed:
            return {"error": failed}
    pid, error, record["supervisor"] = _spawn(args, paths["exit"] if paths else None)
    if error or pid is None:
        record.pop("launching", None)
        return _failed_launch(paths, record, f"could not start the job: {error}")
    return _launched(args, paths, record, pid)


def _live_job(pidfile: str) -> int | None:
    """The pid of the job the pidfile names where it still runs (its start time matches), else None."""
    pid, start = read_pidfile(pidfile)
    return pid if pid and start is not None and alive(pid, start) else None


def _checked(problem: str | None, program: str | None, running: int | None) -> LaunchReply:
    """check_only's reply: why the job cannot start, else the program it would run; with the
    job that runs from the pidfile now (its pid), which the check leaves alone."""
    reply: LaunchReply = {"error": problem} if problem else {"changed": False, "program": program}
    if running:
        reply["running"] = running
    return reply


def _record_launching(paths: JobPaths, record: LaunchRecord) -> str | None:
    """Before the job starts: a record of this launch (its log offset, its start time) that
    says it has started no job yet, and no pidfile naming the job it replaces. A launch cut
    short from here on (the agent ends a request's processes when the controller goes away)
    leaves the truth for the next verify, not the stopped job's pid and record. Why it cannot
    be written, or None."""
    record["launching"] = True
    try:
        write_atomic(paths["meta"], json_dumps(record).encode(), RECORD_MODE)
        if os.path.lexists(paths["pid"]):
            os.unlink(paths["pid"])  # names a job already stopped: it must not be trusted
    except OSError as exc:
        return (f"cannot write the launch record {paths['meta']}: {exc.strerror} (errno {exc.errno}); the job "
                "was not started")
    return None


def _record_job(paths: JobPaths, record: LaunchRecord, pid: int) -> str | None:
    """The job started: its launch record and pidfile name it (and its start time) at once,
    before the launch waits to see whether it ends at once; why they cannot be written, or None."""
    p = read_proc(pid)
    record["pid"], record["start"] = pid, (p.start if p is not None and p.sid == pid else None)
    record.pop("launching", None)
    try:
        write_atomic(paths["meta"], json_dumps(record).encode(), RECORD_MODE)
        write_atomic(paths["pid"], f"{pid}\n".encode())
    except OSError as exc:
        return f"cannot write {paths['pid']}: {exc.strerror} (errno {exc.errno})"
    return None


def _launched(args: LaunchArgs, paths: JobPaths | None, record: LaunchRecord, pid: int) -> LaunchReply:
    """Record the launch; a job that already ended is reported with its exit status."""
    if paths:
        failed = _record_job(paths, record, pid)
        if failed:
            send_signal(-pid, signal.SIGKILL)  # never leave a job that nothing tracks
            return {"error": f"{failed}; the job (pid {pid}) was killed"}
    p = _settle(pid, float(args.get("settle", SETTLE_S)))
    ended: ExitRecord | None = None
    if p is None or p.state == "Z" or p.sid != pid:
        ended = _await_exit(paths["exit"], pid) if paths else {"pid": pid, "unknown": True}
    start = p.start if p is not None and p.sid == pid else (ended or {}).get("start")
    if paths and start != record["start"]:  # it ended before its start time was read: the exit record's
        record["start"] = start
        with ignored(OSError):  # the job has ended: the record names it by pid, its exit record says how
            write_atomic(paths["meta"], json_dumps(record).encode(), RECORD_MODE)
    record["start"] = start
    reply: LaunchReply = {"changed": True, "pid": pid, "log": args.get("log"),
                          "exit_file": paths["exit"] if paths else None}
    if ended is None and p is not None:
        reply.update({"pgid": p.pgid, "sid": p.sid, "cmdline": p.cmdline, "start": p.start})
        return reply
    reply["exited"] = ended if ended is not None else {"pid": pid, "unknown": True}
    if args.get("log"):
        reply["log_tail"] = tail_lines(args["log"], record["log_offset"])
    return reply


#: How long a launch watches its job by default (the task's `settle`).
SETTLE_S = 0.25


def _settle(pid: int, wait_s: float) -> Proc | None:
    """The job `wait_s` after its exec: one that fails at once (bad arguments, missing file)
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


def _await_exit(exit_file: str, pid: int, wait_s: float = 5.0) -> ExitRecord:
    """The supervisor's exit record of a job that ended at once (it lands within ms)."""
    deadline = time.time() + wait_s
    while True:
        raw = read_json(exit_file, "exit file")
        record = None if raw is None else as_exit_record(raw)
        if record and record.get("pid") == pid:
            return record
        if time.time() >= deadline:
            return {"pid": pid, "unknown": True}
        time.sleep(0.01)


def _failed_launch(paths: JobPaths | None, record: LaunchRecord, problem: str) -> LaunchReply:
    """The launch record survives a failed launch, so later checks read only this run's log."""
    if paths:
        record["error"] = problem
        try:
            if os.path.lexists(paths["pid"]):
                os.unlink(paths["pid"])  # names a job already stopped: it must not be trusted
            write_atomic(paths["meta"], json_dumps(record).encode(), RECORD_MODE)
        except OSError:
            pass
    return {"error": problem}


def _earlier_supervisors(pidfile: str) -> list[list[int | None]]:
    """[pid, start] of the supervisors the current launch record names that still live: the
    last job has ended (or it would be running), but a helper it daemonized has not, and its
    supervisor holds it. The new record carries them, so kill_old still stops those helpers."""
    def lookup(pid: int) -> Proc | None:
        p = read_proc(pid)
        return p if p is not None and p.state != "Z" else None
    return [[pid, start] for pid, start in live_supervisors(launch_record(pidfile), lookup)]


def _writable_dir(path: str, check: bool) -> str | None:
    """None when files can be created in directory `path`, else why not. First what can be told
    without making anything (check mode and check_only stop there, and a launch names a folder
    it cannot use as they do); then, unless check, the folder is made and a file made and
    removed in it, which finds what no check foresees (a full disk, a quota)."""
    probe = _nearest_existing(path)
    if not os.path.isdir(probe):
        return f"{probe} is not a directory"
    why = _no_new_files(probe)
    if why:
        what = probe if probe == path else f"{probe} (to create {path})"
        return f"{what} {why}"
    if check:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        fd, name = create_temp_beside(os.path.join(path, ".opsrunner-probe"))
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"{exc.filename or path}: {exc.strerror} (errno {exc.errno})"
    return None


def _nearest_existing(path: str) -> str:
    """`path`, or the nearest folder above it that exists (where it would be made)."""
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/")) or "/"
    return path


#: The kernel's own file systems: no file or folder can be made in them, by root either,
#: though access(2) tells root it may (a log or pidfile there is a typo).
KERNEL_FS = ("/proc", "/sys")


def _no_new_files(folder: str) -> str | None:
    """Why no file or folder can be made in `folder` (an existing directory), as far as can be
    told without making one; None when it looks possible."""
    try:
        here, root = os.stat(folder).st_dev, os.stat("/").st_dev
        for mount in KERNEL_FS:
            dev = os.stat(mount).st_dev
            if dev == here and dev != root:  # (one not mounted is a plain folder of /)
                return f"is on the kernel's {mount} file system, where no file or folder can be made"
    except OSError:
        pass
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return "is on a read-only file system" if read_only else "is not writable"


def _full(folder: str, new_file: bool) -> str | None:
    """Why nothing can be written in `folder` (or the folder it will be made in): its file
    system has no block left for this user (root may use the blocks kept for root), or no
    inode for a new file; None otherwise, and where the file system tells no counts. A file
    can still be made on a full disk, so making one (the launch's probe) does not find this:
    the job would start and fail at its first write, after the old run was stopped."""
    probe = _nearest_existing(folder)
    try:
        st = os.statvfs(probe)
    except OSError:
        return None
    root = os.geteuid() == 0
    if st.f_blocks and (st.f_bfree if root else st.f_bavail) == 0:
        return f"{probe} is on a full file system (no block free{'' if root else ' for this user'})"
    if new_file and st.f_files and (st.f_ffree if root else st.f_favail) == 0:
        return f"{probe} is on a file system with no inode free (no new file can be made)"
    return None


def _would_exist(path: str, args: LaunchArgs) -> bool:
    """Check mode: an earlier task (deploy_code) would have created this path or one below it."""
    path = os.path.abspath(path).rstrip("/")
    for made in args.get("would_exist") or ():
        made = os.path.abspath(os.path.expanduser(made)).rstrip("/")
        if made == path or made.startswith(path + "/"):
            return True
    return False


def preflight(args: LaunchArgs, paths: JobPaths | None, check: bool) -> tuple[str | None, str | None]:
    """(why the job cannot start or None, the resolved program): checked before anything starts."""
    chdir = args.get("chdir")
    if chdir and not os.path.isdir(chdir) and not (check and _would_exist(chdir, args)):
        return f"chdir {chdir} does not exist on the target", None
    log = args.get("log")
    if log and log != os.devnull:
        problem = check_regular(log, "log")
        if problem:
            return problem, None
        real = os.path.realpath(log)
        if real != os.path.abspath(log) and not os.path.isdir(os.path.dirname(real)):
            # A link to an unmounted disk, say: making its folder would write where no one looks.
            return (f"cannot open the log {log}: it leads through a symbolic link to {real}, whose folder "
                    f"{os.path.dirname(real)} does not exist"), None
        folder = os.path.dirname(os.path.abspath(log))
        why = _writable_dir(folder, check) or _full(folder, not os.path.exists(log))
        if why:
            return f"cannot open the log {log}: directory {why}", None
        if os.path.exists(log) and not os.access(log, os.W_OK):
            return f"cannot open the log {log}: {os.strerror(errno.EACCES)} (errno {errno.EACCES})", None
        if not check:
            try:
                os.close(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644))
            except OSError as exc:
                return f"cannot open the log {log}: {exc.strerror} (errno {exc.errno})", None
    if paths:
        why = _writable_dir(os.path.dirname(os.path.abspath(paths["pid"])), check)
        if why:
            return f"cannot write the pidfile {paths['pid']}: {why}; the job was not started", None
    problem, program = resolve_program(args["argv"][0], args.get("env") or {}, chdir)
    if problem and check and "/" in args["argv"][0] and _would_exist(
            os.path.join(chdir or os.getcwd(), args["argv"][0]), args):
        return None, args["argv"][0]  # deployed by an earlier task: it will exist
    return problem, program


def supervisor_code() -> str:
    """The supervisor module's code, marshalled (base64) for OPSRUNNER_SUPERVISOR_CODE. Its
    bytecode comes from this package's cache (the module's loader), so no launch compiles it;
    its interpreter is this one (/proc/self/exe), so the bytecode fits it. A cold Python that
    unmarshals it spends ~3.5 ms of CPU less than one that parses the source, at every launch."""
    import binascii
    import marshal

    from . import supervisor
    loader = supervisor.__spec__.loader if supervisor.__spec__ is not None else None
    if loader is None or not hasattr(loader, "get_code"):
        raise ImportError(f"the loader of {supervisor.__name__} ({loader!r}) does not give its code")
    code = loader.get_code(supervisor.__name__)
    return binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii")


_PRCTL: list[CFuncPtr | None] = []


def _prctl() -> CFuncPtr | None:
    """prctl(2), looked up once per worker (the watchdog's load_prctl), or None."""
    if not _PRCTL:
        _PRCTL.append(load_prctl())
    return _PRCTL[0]


def _supervisor_argv(env: dict[str, str]) -> list[str]:
    """A command line that names no job: the supervisor part's code comes in env."""
    env["OPSRUNNER_SUPERVISOR_CODE"] = supervisor_code()
    return [SUPERVISOR_NAME, "-S", "-c", SUPERVISOR_BOOT]


def _spawn(args: LaunchArgs, exit_file: str | None) -> tuple[int | None, str | None, list[int | None] | None]:
    """Start the supervisor (own session, neutral command line), which forks the job:
    (the job's pid, why it failed or None, [the supervisor's pid, its start] or None).

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
    spec = dict(args, exit_file=exit_file, handshake_fd=w)  # protocol_jobs.py's LaunchSpec
    env["OPSRUNNER_SPEC"] = binascii.b2a_base64(marshal.dumps(spec), newline=False).decode("ascii")
    argv, exe, prctl = _supervisor_argv(env), os.readlink("/proc/self/exe"), _prctl()
    null = os.open(os.devnull, os.O_RDWR)
    try:
        child = os.fork()
        if child == 0:
            _exec_supervisor(null, w, exe, argv, env, prctl)
    except OSError as exc:
        os.close(r)
        return None, f"cannot start the supervisor: {exc.strerror or exc}", None
    finally:
        os.close(null)
        os.close(w)
    sup = read_proc(child)  # recorded: verify waits for an exit record only while it lives
    pid, error = _handshake(r, child)
    return pid, error, [child, sup.start if sup is not None else None]


def _exec_supervisor(null: int, w: int, exe: str, argv: list[str], env: dict[str, str],
                     prctl: CFuncPtr | None) -> NoReturn:
    """In the forked child: its own session, /dev/null as 0, 1 and 2, the handshake pipe, and
    a child subreaper (the attribute survives the exec; supervisor.py says why); never returns."""
    try:
        os.setsid()
        if prctl is not None:  # where it fails, orphans of the job's tree go to init, as before
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.set_inheritable(w, True)
        os.execve(exe, argv, env)
    finally:
        os._exit(127)


def _handshake(r: int, child: int) -> tuple[int | None, str | None]:
    """(the job's pid, the first error the supervisor reported) from the handshake pipe."""
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
