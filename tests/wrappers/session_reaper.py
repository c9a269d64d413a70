"""Hostile exec wrapper #1, like an exec session that tears down its children.

usage: session_reaper.py [--] ARGV...
Runs ARGV in a new session and, the moment ARGV returns, SIGKILLs every process still
in that session (as container exec tools do when the exec session ends). A naive
`nohup job & disown` inside it is dead right after the call returns.
"""

import os
import signal
import sys


def session_of(pid: str) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return int(stat[stat.rindex(b")") + 2:].split()[3])


def main() -> int:
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    child = os.fork()
    if child == 0:
        os.setsid()
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"session_reaper: {argv[0]}: {exc.strerror}\n")
            os._exit(127)
    _, status = os.waitpid(child, 0)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if session_of(name) == child:
                os.kill(int(name), signal.SIGKILL)
        except OSError:
            continue
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
