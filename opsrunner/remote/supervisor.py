# opsrunner-supervisor: the job's supervisor (Python >= 3.8, builtin modules only).
#
# A module of the agent's package that imports nothing of it: launch.py sends its compiled
# code (from the package's bytecode cache) to a fresh Python, which runs it alone as
# `opsrunner-supervisor`, in a session of its own (the job gets another): it starts the job, waits for it and
# records how it ended. launch.py makes it a child subreaper (prctl before its exec), so what
# the job's tree daemonizes (fork, setsid, fork) is reparented to it, not to init: it reaps
# those orphans, and lives on while one does, so that kill_old still finds them (below).
# It imports no json, re or signal (which bring enum), so it starts in ~8 ms of CPU where
# importing the whole agent took ~20 ms, once per launch on every host.
# The spec comes marshalled, in base64, in OPSRUNNER_SPEC.
from __future__ import annotations

import os
import time

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn, TypedDict

    class Spec(TypedDict, total=False):
        """What launch.py hands over (protocol_jobs.py's LaunchSpec: this module imports nothing of
        the package)."""
        argv: list[str]
        env: dict[str, str]
        chdir: str
        log: str
        umask: str
        exit_file: str | None
        handshake_fd: int

    class ExitRecord(TypedDict, total=False):
        """The exit record (protocol_jobs.py's ExitRecord)."""
        pid: int
        start: int | None
        ended_at: float
        returncode: int | None
        signal: int | None
        oom_kills: int

SUPERVISOR_SIGKILL = 9  # Linux; the signal module is not imported here (see above)


def oom_kill_count() -> int | None:
    """oom_kill events of this process's memory cgroup (v2 memory.events, v1 memory.oom_control)."""
    for line in _read_text("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            files = [f"/sys/fs/cgroup{parts[2]}/memory.events", f"/sys/fs/cgroup/unified{parts[2]}/memory.events"]
        elif "memory" in parts[1].split(","):
            files = [f"/sys/fs/cgroup/memory{parts[2]}/memory.oom_control"]
        else:
            continue
        for name in files:
            for row in _read_text(name).splitlines():
                words = row.split()
                if len(words) == 2 and words[0] == "oom_kill" and words[1].isdigit():
                    return int(words[1])
    return None


def _read_text(path: str) -> str:
    """A small kernel file (/proc, /sys), or "" when it is absent or unreadable (O_NONBLOCK:
    a FIFO put in its place cannot hang the supervisor)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        return os.read(fd, 1 << 16).decode("ascii", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _proc_start(pid: int) -> int | None:
    """The start time (clock ticks since boot) of pid, from /proc/<pid>/stat; None if gone."""
    text = _read_text(f"/proc/{pid}/stat")
    try:
        return int(text[text.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _exit_record_json(record: ExitRecord) -> str:
    """The exit record as JSON: its values are ints, a float and None (no json module here)."""
    return "{" + ", ".join(f'"{key}": {"null" if value is None else repr(value)}'
                           for key, value in record.items()) + "}"


def _write_exit_record(path: str, record: ExitRecord) -> None:
    # A random name created O_EXCL|O_NOFOLLOW, as launch.py's create_temp_beside (this script
    # runs alone): never a link planted in a shared directory.
    tmp = f"{path}.opsrunner-tmp-{os.urandom(6).hex()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, _exit_record_json(record).encode())
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except OSError:
        pass


def supervise() -> None:
    """Runs as `opsrunner-supervisor`: starts the job, waits for it, records its exit, then
    reaps what the job left behind (see _reap_adopted)."""
    import binascii
    import marshal
    spec: Spec = marshal.loads(binascii.a2b_base64(os.environ.pop("OPSRUNNER_SPEC")))
    w = spec["handshake_fd"]
    oom_before = oom_kill_count()  # the job shares this cgroup unless something moves it
    job = os.fork()
    if job == 0:
        _exec_job(spec, w)
    os.close(w)
    status, start = _wait_job(job)
    exit_file = spec.get("exit_file")
    if exit_file:
        record: ExitRecord = {"pid": job, "start": start, "ended_at": time.time(), "returncode": None,
                              "signal": None}
        if os.WIFSIGNALED(status):
            record["signal"] = os.WTERMSIG(status)
        else:
            record["returncode"] = os.WEXITSTATUS(status)
        if record["signal"] == SUPERVISOR_SIGKILL or record["returncode"] == 128 + SUPERVISOR_SIGKILL:
            oom_after = oom_kill_count()  # 137: a shell job whose command was SIGKILLed
            if oom_before is not None and oom_after is not None:
                record["oom_kills"] = oom_after - oom_before
        _write_exit_record(exit_file, record)
    _reap_adopted()


def _wait_job(job: int) -> tuple[int, int | None]:
    """(the job's wait status, its start time) once it has exited. Orphans of its tree that
    this subreaper adopted and that exit first are reaped as they go (no zombies pile up under
    a job that runs for weeks); their statuses are not the job's and are not recorded."""
    while True:
        exited, start = -1, None
        try:  # which child exited, left unreaped: the job's start time is read before it is reaped
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            if info is not None:
                exited = info.si_pid
                if exited == job:
                    start = _proc_start(job)
        except (OSError, AttributeError):  # no waitid: the next child to exit, whichever it is
            pass
        try:
            pid, status = os.waitpid(exited, 0)
        except InterruptedError:
            continue
        if pid == job:
            return status, start


def _reap_adopted() -> None:
    """After the job's exit: reap the orphans of its tree still alive (helpers it daemonized)
    until none is left, then return (the supervisor exits).

    Kept alive rather than leaving a list of their pids: its children stay findable by their
    parent (kill_old stops the descendants of the supervisors a launch record names), and so
    does whatever they daemonize in turn, with no pid to go stale. It costs one idle process
    per ended job whose helpers outlive it, and nothing to a job that leaves none."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _exec_job(spec: Spec, w: int) -> NoReturn:
    step = "setsid"
    try:
        os.setsid()
        if spec.get("umask") is not None:
            os.umask(int(str(spec["umask"]), 8))
        if spec.get("chdir"):
            step = f"chdir {spec['chdir']}"
            os.chdir(spec["chdir"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = spec.get("log") or os.devnull
        step = f"open the log {log}"
        out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.set_inheritable(w, False)
        os.closerange(3, w)
        os.closerange(w + 1, _max_fd())
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("OPSRUNNER_"))
        env.update(spec.get("env") or {})
        default_signals()
        os.write(w, f"ok {os.getpid()}\n".encode())
        argv = spec["argv"]
        step = f"exec {argv[0]}"
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        _tell_failure(w, f"err {step}: {exc.strerror or exc} (errno {exc.errno})\n")
    os._exit(127)


def _tell_failure(w: int, text: str) -> None:
    """Write why the job did not start to the handshake pipe, if launch.py still reads it."""
    try:
        os.write(w, text.encode())
    except OSError:  # it does not: nobody to tell
        return


def default_signals() -> None:
    """Every signal at its default action and none blocked, as a login shell starts a job.

    What is ignored survives exec: every Python ignores SIGPIPE and SIGXFSZ, and a
    controller started from a background shell or nohup has SIGINT, SIGQUIT and SIGHUP
    ignored, which its agent, a wrapper and this supervisor inherit. The job must not."""
    if TYPE_CHECKING:
        import signal as _signal
    else:
        import _signal  # the C module (see above)
    for number in range(1, _signal.NSIG):
        if number in (_signal.SIGKILL, _signal.SIGSTOP):
            continue
        try:
            _signal.signal(number, _signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            continue  # glibc's internal real-time signals (32, 33) cannot be set
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 65536)
    except (ValueError, OSError):
        return 4096


if __name__ == "__main__":  # run by launch.py's boot in a fresh Python; the agent only imports it
    supervise()
