# opsrunner-agent part: exec, the plain command of a shell/command task, run by the agent's
# worker (one fork+exec on the target instead of a Python watchdog started per command).
# The same rules as the watchdog (watchdog.py): the command's stdin is the request's payload
# (its script and env header first); at the deadline the command and everything it started
# are killed and the output so far is returned; once it has exited, a background process
# still holding its output is named in a warning and killed (it would hang the task).
from __future__ import annotations

import errno
import os
import select
import time

from .procs import read_proc
from .watchdog import descendants, exit_code, holds_output, ignored, kill_descendants, open_pidfd

# typing and the messages' types are imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal

    from .protocol_host import ExecArgs, ExecReply
else:
    import _signal as signal  # the C module: `signal` imports enum (~3 ms at every agent start)

#: After the command exits, how long a background process may keep its output open.
EXEC_HOLD_GRACE_S = 0.3
#: Output kept per stream; beyond it the rest is read and dropped, and a warning says so.
EXEC_MAX_OUTPUT = 16 << 20


#: As the bare exec does it (connections/wrappers.py): a cwd that cannot be entered is exit 125.
CD_SCRIPT = 'cd -- "$0" || exit 125; exec "$@"'


class _Run:
    """A command's run as it is collected: its output (bytes, up to EXEC_MAX_OUTPUT of each
    stream), the bytes dropped beyond that, warnings, and whether it ran past its deadline."""
    __slots__ = ("dropped", "output", "timed_out", "warnings")

    def __init__(self) -> None:
        self.output = {"stdout": b"", "stderr": b""}
        self.dropped: dict[str, int] = {}
        self.warnings: list[str] = []
        self.timed_out = False

    def reply(self, rc: int) -> ExecReply:
        reply: ExecReply = {"stdout": self.output["stdout"].decode("latin-1"),  # bytes through JSON, unchanged
                            "stderr": self.output["stderr"].decode("latin-1"),
                            "warnings": self.warnings, "timed_out": self.timed_out, "rc": rc}
        if "stdout" in self.dropped:
            reply["dropped_stdout"] = self.dropped["stdout"]
        if "stderr" in self.dropped:
            reply["dropped_stderr"] = self.dropped["stderr"]
        return reply


def op_exec(args: ExecArgs) -> ExecReply:
    """Run args["argv"] (in args["cwd"]) with this worker's stdin; rc, output, timed_out, warnings."""
    timeout = args.get("timeout")
    deadline = time.time() + float(timeout) if timeout else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = _spawn_command(args, out_w, err_w)
    except OSError as exc:  # as a shell reports it: the program, why, 127 (126: not executable)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        return {"stdout": "", "stderr": f"{args['argv'][0]}: {exc.strerror}\n", "warnings": [], "timed_out": False,
                "rc": 126 if exc.errno in (errno.EACCES, errno.ENOEXEC) else 127}
    for fd in (out_w, err_w):
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the payload is the command's alone: the feeder sees EPIPE when it is done
    os.close(null)
    held = set((os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (out_r, err_r))
    run = _Run()
    return run.reply(_exec_collect(child, {out_r: "stdout", err_r: "stderr"}, held, deadline, run))


def _spawn_command(args: ExecArgs, out_w: int, err_w: int) -> int:
    """posix_spawn (a vfork: ~1 ms less than a fork of this Python per command). The agent made
    every descriptor it inherited close-on-exec (server.py), so the command gets 0, 1, 2 only."""
    argv = list(args["argv"])
    cwd = args.get("cwd")
    if cwd:
        argv = ["/bin/sh", "-c", CD_SCRIPT, cwd, *argv]
    actions = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
    return os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions,
                           setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT))


def _exec_collect(child: int, streams: dict[int, str], held: set[tuple[int, int]], deadline: float | None,
                  run: _Run) -> int:
    """Read the command's output until it is closed; stop the tree at the deadline. Its exit code."""
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    exit_fd = open_pidfd(child)  # readable when the child exits (Linux >= 5.3, Python >= 3.9)
    if exit_fd is not None:
        poller.register(exit_fd, select.POLLIN)
    open_fds, exited_at, nap = set(streams), None, 0.0005
    rc = None
    while True:  # until the output is closed and the command has exited, or the deadline
        now = time.time()
        if deadline is not None and now >= deadline:
            if exit_fd is not None:
                poller.unregister(exit_fd)
                os.close(exit_fd)
                exit_fd = None
            kill_descendants(os.getpid(), 10)
            run.timed_out = True
            rc = 124
            _drain(poller, streams, open_fds, run)
            break
        if rc is None:
            rc, exited_at = _exec_status(child, now)
        if exited_at is not None and now - exited_at > EXEC_HOLD_GRACE_S:
            _release_output(held, run)
        if rc is not None and exit_fd is not None:
            poller.unregister(exit_fd)
            os.close(exit_fd)
            exit_fd = None
        if not open_fds and rc is not None:
            break  # (not another poll: with nothing left to wait for, it only sleeps)
        if exit_fd is not None or open_fds:
            wait = 0.05
        else:  # output closed, no pidfd: its exit is a moment away
            wait, nap = nap, min(nap * 2, 0.05)
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        for fd, _ev in poller.poll(int(wait * 1000) or 1):
            if fd != exit_fd:
                _read_ready(fd, poller, streams, open_fds, run)
            elif rc is None:  # it exited: a WNOHANG wait right now can still miss that
                rc, exited_at = exit_code(os.waitpid(child, 0)[1]), time.time()
        if not open_fds and rc is not None:
            break
    if exit_fd is not None:
        os.close(exit_fd)
    _reap_orphans()
    return rc


def _read_ready(fd: int, poller: select.poll, streams: dict[int, str], open_fds: set[int], run: _Run) -> None:
    """Keep what fd has; at EOF, stop polling it and close it."""
    chunk = os.read(fd, 1 << 16)
    if chunk:
        _keep(run, streams[fd], chunk)
    else:
        poller.unregister(fd)
        open_fds.discard(fd)
        os.close(fd)


def _drain(poller: select.poll, streams: dict[int, str], open_fds: set[int], run: _Run) -> None:
    """What the killed tree wrote before it died (its pipes are closing now)."""
    end = time.time() + 0.5
    while open_fds and time.time() < end:
        for fd, _ev in poller.poll(50):
            _read_ready(fd, poller, streams, open_fds, run)
    for fd in open_fds:
        os.close(fd)


def _exec_status(child: int, now: float) -> tuple[int, float] | tuple[None, None]:
    pid, status = os.waitpid(child, os.WNOHANG)
    return (exit_code(status), now) if pid else (None, None)


def _keep(run: _Run, key: str, chunk: bytes) -> None:
    room = EXEC_MAX_OUTPUT - len(run.output[key])
    if room > 0:
        run.output[key] += chunk[:room]
    dropped = len(chunk) - max(room, 0)
    if dropped > 0:
        run.dropped[key] = run.dropped.get(key, 0) + dropped
        _warn_once(run, f"{key} exceeded {EXEC_MAX_OUTPUT >> 20} MiB: the rest was read and dropped")


def _release_output(held: set[tuple[int, int]], run: _Run) -> None:
    """Name, then kill, background processes (and their trees) that hold the output open."""
    holders = [pid for pid in descendants(os.getpid()) if holds_output(pid, held)]
    below = dict((pid, set(descendants(pid))) for pid in holders)
    inner: set[int] = set().union(*below.values()) if below else set()
    for pid in holders:
        if pid not in inner:  # only the topmost holder of each tree is named
            _warn_once(run, f"background process {pid} ({_cmdline_of(pid)}) still held the command's output "
                       "after the command exited; it was killed (it would die with the exec session anyway: start "
                       "jobs that must outlive the task with launch_detached)")
    for pid in holders:
        for victim in [pid, *sorted(below[pid])]:
            with ignored(OSError):
                os.kill(victim, signal.SIGKILL)


def _warn_once(run: _Run, text: str) -> None:
    if text not in run.warnings:
        run.warnings.append(text)


def _cmdline_of(pid: int) -> str:
    p = read_proc(pid)
    return (p.cmdline[:200] if p is not None else "") or "?"


def _reap_orphans() -> None:
    """This worker is a subreaper: collect what its command left behind and has ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
