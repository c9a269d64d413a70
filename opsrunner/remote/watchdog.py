# opsrunner-watchdog: runs ARGV with a deadline on the target host (Python >= 3.8, stdlib only).
# Sent alone, inline (`python3 -S -c SOURCE`), so it imports nothing of opsrunner: it runs
# around bare commands and outside the wrapper chain, whose stdin is the command's and where
# no agent cache exists. The agent's modules import its kernel helpers (prctl, pidfds, the
# live process tree, descriptor holders) from it, so each exists once.
# usage: python3 -c SOURCE SECONDS ARGV...
# SECONDS "none" (around a long-lived agent): no deadline, and no subreaper, so that a job
# the agent launched (double-forked, in its own session) is not adopted, and not killed with
# the tree when the connection closes.
# It becomes a child subreaper, so every process the command starts stays its descendant
# even after double forks. At the deadline, or when the controller's channel goes away,
# it kills that whole tree. When the command exits while a background descendant still
# holds one of the descriptors the session gave it (that would hang the channel, or keep
# an exec wrapper waiting), it names that process in a warning line on stderr, kills it
# (it would die with the exec session anyway) and exits at once.
# Exit status: the command's, or 124 with a marker line on stderr.
from __future__ import annotations

import os
import select
import stat
import sys
import time

# typing and the annotations' types are imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from _ctypes import CFuncPtr
    from collections.abc import Callable, Iterable
    from types import TracebackType
    from typing import Any, NoReturn
else:
    import _signal as signal  # the C module: `signal` imports enum (~3 ms at every start)


#: prctl(2) option: orphans of the caller's descendants are reparented to it, not to init.
PR_SET_CHILD_SUBREAPER = 36


def load_prctl() -> CFuncPtr | None:
    """prctl(2) from the C library through _ctypes, or None where that is not possible."""
    try:
        import _ctypes

        if TYPE_CHECKING:
            from ctypes import c_int
        else:
            class c_int(_ctypes._SimpleCData):
                _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = c_int

        # dlopen(None): the program itself and its libraries (typeshed's dlopen wants a path)
        program: Any = None
        return Function(_ctypes.dlsym(_ctypes.dlopen(program, 0), "prctl"))
    except Exception:
        return None


class ignored:
    """contextlib.suppress without importing contextlib (~3 ms of CPU at every start)."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal that killed it."""
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def open_pidfd(pid: int) -> int | None:
    """A pidfd of `pid`, readable once it has exited (Linux >= 5.3, Python >= 3.9), or None."""
    if sys.version_info >= (3, 9):
        try:
            return os.pidfd_open(pid)
        except (AttributeError, OSError):
            return None
    return None

MARKER = b"\n[opsrunner] timed out\n"
WARNING = "\n[opsrunner] warning: "
#: After the command exits, how long a background process may keep its output open (a
#: last write in flight) before it is named and killed.
HOLD_GRACE_S = 0.3


def live_children() -> dict[int, list[int]]:
    """{ppid: [pid, ...]} of every live (non-zombie) process, from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def walk(children: dict[int, list[int]], roots: Iterable[int]) -> list[int]:
    """Every descendant of `roots` in a {ppid: [pid, ...]} map, each once."""
    found: list[int] = []
    todo = list(roots)
    seen = set(todo)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def descendants(root: int) -> list[int]:
    """Live descendants of root (zombies are dead: nothing to kill or to hold a descriptor)."""
    return walk(live_children(), [root])


def kill_descendants(root: int, rounds: int, settle: Callable[[], object] | None = None) -> None:
    """SIGKILL root's descendants, again while new ones appear (a fork racing the kill);
    between rounds `settle` (the watchdog reaps, as their subreaper), else a 10 ms pause."""
    for _ in range(rounds):
        pids = descendants(root)
        if not pids:
            return
        for pid in pids:
            with ignored(OSError):
                os.kill(pid, signal.SIGKILL)
        if settle is None:
            time.sleep(0.01)
        else:
            settle()


def holds_output(pid: int, targets: set[tuple[int, int]]) -> bool:
    """True when process pid has a descriptor open on one of `targets` ({(st_dev, st_ino)})."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in targets:
            return True
    return False


def is_channel(st: os.stat_result) -> bool:
    """Pipes, sockets and terminals carry the session; files and /dev/null do not."""
    kind = stat.S_IFMT(st.st_mode)
    if kind in (stat.S_IFIFO, stat.S_IFSOCK):
        return True
    return kind == stat.S_IFCHR and st.st_rdev != os.stat("/dev/null").st_rdev


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
    except OSError:
        return "?"


def release_output(holders: list[int]) -> None:
    """Warn about, then kill, background processes (and their trees) that hold the output.
    Only the topmost holder of each tree is named (its children inherited the descriptor)."""
    below = {pid: set(descendants(pid)) for pid in holders}
    inner: set[int] = set().union(*below.values())
    for pid in holders:
        if pid in inner:
            continue
        os.write(2, (WARNING + f"background process {pid} ({cmdline(pid)}) still held the command's output after "
                     "the command exited; it was killed (it would die with the exec session anyway: "
                     "start jobs that must outlive the task with launch_detached)\n").encode("utf-8", "replace"))
    for pid in holders:
        for victim in [pid, *below[pid]]:
            with ignored(OSError):
                os.kill(victim, signal.SIGKILL)
    reap(0.2)


def kill_tree(me: int) -> None:
    kill_descendants(me, 3, lambda: reap(0.2))


def reap(wait_s: float) -> None:
    end = time.time() + wait_s
    while time.time() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def channel_gone(poller: select.poll) -> bool:
    return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))


def start_command(argv: list[str]) -> int:
    """Fork and exec the command; its pid."""
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    return child


def session_descriptors() -> set[tuple[int, int]]:
    """Every descriptor the session handed us (stdout, stderr, a leaked pty...): a background
    child still holding one keeps the exec session (and so the channel) open."""
    targets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(fd))
        except OSError:
            continue
        if is_channel(st):
            targets.add((st.st_dev, st.st_ino))
    return targets


def watch(child: int, deadline: float | None) -> NoReturn:
    """Wait for the command and the descriptors it leaves held, the deadline or the channel's
    end; exit with the command's status, 124 at the deadline, 255 when the channel is gone."""
    tick = 0.02 if deadline is not None else 0.1
    me = os.getpid()
    targets = session_descriptors()
    poller = select.poll()
    poller.register(1, 0)
    exit_fd = open_pidfd(child)  # wakes the poll below when the command exits
    if exit_fd is not None:
        poller.register(exit_fd, select.POLLIN)
    status = None
    exited_at = 0.0  # set with status
    while deadline is None or time.time() < deadline:
        if status is None:
            pid, raw = os.waitpid(child, os.WNOHANG)
            if pid:
                status, exited_at = exit_code(raw), time.time()
        if status is not None:
            reap(0)
            holders = [p for p in descendants(me) if holds_output(p, targets)]
            if holders and time.time() - exited_at > HOLD_GRACE_S:
                release_output(holders)
                holders = []
            if not holders:
                sys.exit(status)
        if status is not None and exit_fd is not None:
            poller.unregister(exit_fd)  # readable from now on: it would spin the loop
            os.close(exit_fd)
            exit_fd = None
        if channel_gone(poller):
            kill_tree(me)
            sys.exit(255)
        # A tick, or at once when the command exits (its pidfd) or the channel goes (POLLERR or
        # POLLHUP on fd 1).
        for fd, _ev in poller.poll(tick * 1000):
            if fd == exit_fd and status is None:  # it exited: a WNOHANG wait could still miss it
                status, exited_at = exit_code(os.waitpid(child, 0)[1]), time.time()
    kill_tree(me)
    os.write(2, MARKER)
    sys.exit(124)


def main() -> NoReturn:
    # "none": no deadline; it only stops the tree when the channel goes (a long-lived agent)
    deadline = None if sys.argv[1] == "none" else time.time() + float(sys.argv[1])
    argv = sys.argv[2:]
    if deadline is not None:  # not around an agent: a job it launches must be able to leave
        prctl = load_prctl()
        if prctl is not None:
            prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    watch(start_command(argv), deadline)


if __name__ == "__main__":  # sent inline with -c; the agent imports its helpers
    main()
