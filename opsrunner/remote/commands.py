# opsrunner-agent part: exec, the plain command of a shell/command task, run by the agent's
# worker (one fork+exec on the target instead of a Python watchdog started per command).
# The same rules as the watchdog (watchdog.py): the command's stdin is the request's payload
# (its script and env header first); at the deadline the command and everything it started
# are killed and the output so far is returned; once it has exited, a background process
# still holding its output is named in a warning and killed (it would hang the task).
import errno
import os
import select as _poll_mod  # procs.py defines select(): the parts share one namespace
import signal
import time

#: After the command exits, how long a background process may keep its output open.
EXEC_HOLD_GRACE_S = 0.3
#: Output kept per stream; beyond it the rest is read and dropped, and a warning says so.
EXEC_MAX_OUTPUT = 16 << 20


def op_exec(args):
    """Run args["argv"] (in args["cwd"]) with this worker's stdin; rc, output, timed_out, warnings."""
    deadline = time.time() + float(args["timeout"]) if args.get("timeout") else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    child = os.fork()
    if child == 0:
        _exec_child(args, out_w, err_w, (out_r, err_r))
    for fd in (out_w, err_w):
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the payload is the command's alone: the feeder sees EPIPE when it is done
    os.close(null)
    held = set((os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (out_r, err_r))
    reply = {"stdout": b"", "stderr": b"", "warnings": [], "timed_out": False, "rc": None}
    _exec_collect(child, {out_r: "stdout", err_r: "stderr"}, held, deadline, reply)
    for key in ("stdout", "stderr"):
        reply[key] = reply[key].decode("latin-1")  # bytes through JSON, unchanged
    return reply


def _exec_child(args, out_w, err_w, parent_fds):
    try:
        for fd in parent_fds:
            os.close(fd)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):  # as a fresh process has them
            signal.signal(sig, signal.SIG_DFL)
        os.closerange(3, _max_fd())
        argv = args["argv"]
        if args.get("cwd"):
            try:
                os.chdir(args["cwd"])
            except OSError as exc:
                os.write(2, ("cd: %s: %s\n" % (args["cwd"], exc.strerror)).encode("utf-8", "replace"))
                os._exit(125)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, ("%s: %s\n" % (args["argv"][0], exc.strerror)).encode("utf-8", "replace"))
        os._exit(126 if exc.errno in (errno.EACCES, errno.ENOEXEC) else 127)
    finally:
        os._exit(127)


def _exec_collect(child, streams, held, deadline, reply):
    """Read the command's output until it is closed; stop the tree at the deadline."""
    poller = _poll_mod.poll()
    for fd in streams:
        poller.register(fd, _poll_mod.POLLIN)
    open_fds, exited_at = set(streams), None
    while open_fds or reply["rc"] is None:
        now = time.time()
        if deadline is not None and now >= deadline:
            _kill_descendants(os.getpid(), 10)
            reply["timed_out"] = True
            reply["rc"] = 124
            _drain(poller, streams, open_fds, reply)
            break
        if reply["rc"] is None:
            reply["rc"], exited_at = _exec_status(child, now)
        if exited_at is not None and now - exited_at > EXEC_HOLD_GRACE_S:
            _release_output(held, reply)
        wait = 0.05 if open_fds else 0.005  # output closed: its exit is a moment away
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        for fd, _ev in poller.poll(int(wait * 1000)):
            chunk = os.read(fd, 1 << 16)
            if chunk:
                _keep(reply, streams[fd], chunk)
            else:
                poller.unregister(fd)
                open_fds.discard(fd)
                os.close(fd)
    _reap_orphans()


def _drain(poller, streams, open_fds, reply):
    """What the killed tree wrote before it died (its pipes are closing now)."""
    end = time.time() + 0.5
    while open_fds and time.time() < end:
        for fd, _ev in poller.poll(50):
            chunk = os.read(fd, 1 << 16)
            if chunk:
                _keep(reply, streams[fd], chunk)
            else:
                poller.unregister(fd)
                open_fds.discard(fd)
    for fd in open_fds:
        os.close(fd)


def _exec_status(child, now):
    pid, status = os.waitpid(child, os.WNOHANG)
    return (_exit_code(status), now) if pid else (None, None)


def _exit_code(status):
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


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
    holders = [pid for pid in _tree_of(os.getpid()) if _holds(pid, held)]
    below = dict((pid, set(_tree_of(pid))) for pid in holders)
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


def _holds(pid, held):
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in held:
            return True
    return False


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
