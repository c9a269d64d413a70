# opsrunner-agent part: exec, the plain command of a shell/command task, run by the agent's
# worker (one fork+exec on the target instead of a Python watchdog started per command).
# The same rules as the watchdog (watchdog.py): the command's stdin is the request's payload
# (its script and env header first); at the deadline the command and everything it started
# are killed and the output so far is returned; once it has exited, a background process
# still holding its output is named in a warning and killed (it would hang the task).
import _signal as signal  # the C module: `signal` imports enum (~3 ms at every agent start)
import errno
import os
import select
import time

from .procs import read_proc
from .watchdog import descendants, exit_code, holds_output, kill_descendants, open_pidfd

#: After the command exits, how long a background process may keep its output open.
EXEC_HOLD_GRACE_S = 0.3
#: Output kept per stream; beyond it the rest is read and dropped, and a warning says so.
EXEC_MAX_OUTPUT = 16 << 20


#: As the bare exec does it (connections/wrappers.py): a cwd that cannot be entered is exit 125.
CD_SCRIPT = 'cd -- "$0" || exit 125; exec "$@"'


def op_exec(args):
    """Run args["argv"] (in args["cwd"]) with this worker's stdin; rc, output, timed_out, warnings."""
    deadline = time.time() + float(args["timeout"]) if args.get("timeout") else None
    reply = {"stdout": b"", "stderr": b"", "warnings": [], "timed_out": False, "rc": None}
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = _spawn_command(args, out_w, err_w)
    except OSError as exc:  # as a shell reports it: the program, why, 127 (126: not executable)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        reply["stderr"] = "%s: %s\n" % (args["argv"][0], exc.strerror)
        reply["stdout"] = ""
        reply["rc"] = 126 if exc.errno in (errno.EACCES, errno.ENOEXEC) else 127
        return reply
    for fd in (out_w, err_w):
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the payload is the command's alone: the feeder sees EPIPE when it is done
    os.close(null)
    held = set((os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (out_r, err_r))
    _exec_collect(child, {out_r: "stdout", err_r: "stderr"}, held, deadline, reply)
    for key in ("stdout", "stderr"):
        reply[key] = reply[key].decode("latin-1")  # bytes through JSON, unchanged
    return reply


def _spawn_command(args, out_w, err_w):
    """posix_spawn (a vfork: ~1 ms less than a fork of this Python per command). The agent made
    every descriptor it inherited close-on-exec (server.py), so the command gets 0, 1, 2 only."""
    argv = list(args["argv"])
    if args.get("cwd"):
        argv = ["/bin/sh", "-c", CD_SCRIPT, args["cwd"], *argv]
    actions = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
    return os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions,
                           setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT))


def _exec_collect(child, streams, held, deadline, reply):
    """Read the command's output until it is closed; stop the tree at the deadline."""
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    exit_fd = open_pidfd(child)  # readable when the child exits (Linux >= 5.3, Python >= 3.9)
    if exit_fd is not None:
        poller.register(exit_fd, select.POLLIN)
    open_fds, exited_at, nap = set(streams), None, 0.0005
    while open_fds or reply["rc"] is None:
        now = time.time()
        if deadline is not None and now >= deadline:
            if exit_fd is not None:
                poller.unregister(exit_fd)
                os.close(exit_fd)
                exit_fd = None
            kill_descendants(os.getpid(), 10)
            reply["timed_out"] = True
            reply["rc"] = 124
            _drain(poller, streams, open_fds, reply)
            break
        if reply["rc"] is None:
            reply["rc"], exited_at = _exec_status(child, now)
        if exited_at is not None and now - exited_at > EXEC_HOLD_GRACE_S:
            _release_output(held, reply)
        if reply["rc"] is not None and exit_fd is not None:
            poller.unregister(exit_fd)
            os.close(exit_fd)
            exit_fd = None
        if not open_fds and reply["rc"] is not None:
            break  # (not another poll: with nothing left to wait for, it only sleeps)
        if exit_fd is not None or open_fds:
            wait = 0.05
        else:  # output closed, no pidfd: its exit is a moment away
            wait, nap = nap, min(nap * 2, 0.05)
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        for fd, _ev in poller.poll(int(wait * 1000) or 1):
            if fd != exit_fd:
                _read_ready(fd, poller, streams, open_fds, reply)
            elif reply["rc"] is None:  # it exited: a WNOHANG wait right now can still miss that
                reply["rc"], exited_at = exit_code(os.waitpid(child, 0)[1]), time.time()
    if exit_fd is not None:
        os.close(exit_fd)
    _reap_orphans()


def _read_ready(fd, poller, streams, open_fds, reply):
    """Keep what fd has; at EOF, stop polling it and close it."""
    chunk = os.read(fd, 1 << 16)
    if chunk:
        _keep(reply, streams[fd], chunk)
    else:
        poller.unregister(fd)
        open_fds.discard(fd)
        os.close(fd)


def _drain(poller, streams, open_fds, reply):
    """What the killed tree wrote before it died (its pipes are closing now)."""
    end = time.time() + 0.5
    while open_fds and time.time() < end:
        for fd, _ev in poller.poll(50):
            _read_ready(fd, poller, streams, open_fds, reply)
    for fd in open_fds:
        os.close(fd)


def _exec_status(child, now):
    pid, status = os.waitpid(child, os.WNOHANG)
    return (exit_code(status), now) if pid else (None, None)


def _keep(reply, key, chunk):
    room = EXEC_MAX_OUTPUT - len(reply[key])
    if room > 0:
        reply[key] += chunk[:room]
    dropped = len(chunk) - max(room, 0)
    if dropped > 0:
        reply["dropped_" + key] = reply.get("dropped_" + key, 0) + dropped
        _warn_once(reply, "%s exceeded %d MiB: the rest was read and dropped" % (key, EXEC_MAX_OUTPUT >> 20))


def _release_output(held, reply):
    """Name, then kill, background processes (and their trees) that hold the output open."""
    holders = [pid for pid in descendants(os.getpid()) if holds_output(pid, held)]
    below = dict((pid, set(descendants(pid))) for pid in holders)
    inner = set().union(*below.values()) if below else set()
    for pid in holders:
        if pid not in inner:  # only the topmost holder of each tree is named
            _warn_once(reply, "background process %d (%s) still held the command's output after the "
                       "command exited; it was killed (it would die with the exec session anyway: start "
                       "jobs that must outlive the task with launch_detached)" % (pid, _cmdline_of(pid)))
    for pid in holders:
        for victim in [pid, *sorted(below[pid])]:
            try:
                os.kill(victim, signal.SIGKILL)
            except OSError:
                pass


def _warn_once(reply, text):
    if text not in reply["warnings"]:
        reply["warnings"].append(text)


def _cmdline_of(pid):
    p = read_proc(pid)
    return (p.cmdline[:200] if p is not None else "") or "?"


def _reap_orphans():
    """This worker is a subreaper: collect what its command left behind and has ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
