"""Hostile exec wrapper #3, like an exec session that ends everything it started, detached or not.

usage: tree_reaper.py [--] ARGV...
Becomes a child subreaper (so a double-forked, setsid process is still its descendant), runs
ARGV, and the moment ARGV returns SIGKILLs every process left below it, as a hop that runs
each session in a PID namespace or a cgroup of its own does. No process started through it
outlives the call: a tool must not report such a launch as running.
"""

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def children(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return found


def main() -> int:
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"tree_reaper: {argv[0]}: {exc.strerror}\n")
            os._exit(127)
    _, status = os.waitpid(child, 0)
    while True:  # orphans land here (subreaper): kill and reap until none is left
        left = children(os.getpid())
        if not left:
            break
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:  # each killed one reaped; its own children are ours now (next round)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
