# opsrunner-agent part 5: the dispatcher. The parts (procs, launch, verify, files, agent,
# server) are sent concatenated as one script (Python >= 3.8, stdlib only); server.py runs
# the long-lived loop that calls `dispatch` once per request, each in a forked worker.
# An op is a function `op_x(args: XArgs) -> XReply` (protocol.py has the table; Reply below
# is their union); a payload (the tar stream of "write") is its stdin.
from __future__ import annotations

import os

from .commands import op_exec
from .diagnose import op_tail
from .facts import op_facts
from .files import op_clear, op_delete, op_read, op_stat, op_write
from .fsops import op_fs_file, op_fs_put, op_fs_stat, op_lineinfile, op_wait_for
from .guards import Refused
from .launch import op_launch
from .procs import foreign_proc, op_kill, op_select
from .reads import Unreadable
from .releases import op_release, op_releases
from .rollback import op_rollback
from .unlink import op_unlink_current
from .verify import op_gpu_wait, op_verify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping, Union

    from .protocol import ErrorReply
    from .protocol_files import (
        ClearReply,
        DeleteReply,
        FsFileReply,
        FsPutReply,
        FsStatReply,
        LineInFileReply,
        ReadReply,
        ReleaseReply,
        ReleasesReply,
        StatReply,
        TailReply,
        UnlinkCurrentReply,
        WaitForReply,
        WriteReply,
    )
    from .protocol_host import ExecReply, FactsReply
    from .protocol_jobs import GpuWaitReply, KillReply, LaunchReply, RollbackReply, SelectReply, VerifyReply

    #: Any op's reply (the dispatcher's type).
    Reply = Union[ErrorReply, KillReply, SelectReply, LaunchReply, VerifyReply, GpuWaitReply, ClearReply,
                  StatReply, WriteReply, DeleteReply, ReadReply, TailReply, FactsReply, FsStatReply,
                  FsPutReply, FsFileReply, LineInFileReply, WaitForReply, ExecReply,
                  ReleasesReply, ReleaseReply, RollbackReply, UnlinkCurrentReply]

OPS: dict[str, Callable[..., Reply]] = {"kill": op_kill, "select": op_select, "launch": op_launch, "verify": op_verify,
       "gpu_wait": op_gpu_wait, "clear": op_clear, "stat": op_stat, "write": op_write,
       "delete": op_delete, "read": op_read, "tail": op_tail, "facts": op_facts,
       "fs_stat": op_fs_stat, "fs_put": op_fs_put, "fs_file": op_fs_file, "lineinfile": op_lineinfile,
       "wait_for": op_wait_for, "exec": op_exec,
       "releases": op_releases, "release": op_release, "rollback": op_rollback,
       "unlink_current": op_unlink_current}


PATH_ARGS = ("pidfile", "log", "chdir", "dest", "path")
#: The ops whose verdicts rest on pids read from /proc (refused where /proc is another namespace's).
PID_OPS = frozenset(("kill", "select", "launch", "verify", "gpu_wait", "rollback"))


def dispatch(request: Mapping[str, object]) -> Reply:
    """Run one request {"op": ..., "args": {...}} (protocol.py's Request); the reply dict
    ({"error": ...} on failure)."""
    name = request.get("op")
    op = OPS.get(name) if isinstance(name, str) else None
    if op is None:
        return {"error": f"unknown agent operation {name!r}"}
    args = request.get("args") or {}
    if not isinstance(args, dict):
        return {"error": f"the arguments of agent operation {name!r} are not an object: {args!r}"}
    if name in PID_OPS:
        foreign = foreign_proc()
        if foreign:
            return {"error": foreign}
    for key in PATH_ARGS:
        if isinstance(args.get(key), str):
            args[key] = os.path.expanduser(args[key])
    try:
        return op(args)
    except Refused as exc:  # a guard's refusal names its rule; nothing was done
        return {"error": str(exc), "refused": [exc.rule]}
    except Unreadable as exc:  # a file that is there but cannot be used: the message names it and says why
        return {"error": str(exc)}
    except Exception as exc:  # reported to the controller as the task's failure message
        return {"error": f"{type(exc).__name__}: {exc}"}
