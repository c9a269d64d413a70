"""The agent's ops as the controller names them: each op bound to its request and reply types
(remote/protocol_jobs.py, protocol_files.py and protocol_host.py, shared with the agent), so
mypy checks every request a module builds and every key it reads from a reply. Modules call
`ctx.agent(ops.KILL, request)`, never an op by its bare name with an untyped dict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import (
        ClearArgs,
        ClearReply,
        DeleteArgs,
        DeleteReply,
        FsFileArgs,
        FsFileReply,
        FsPutArgs,
        FsPutReply,
        FsStatArgs,
        FsStatReply,
        LineInFileArgs,
        LineInFileReply,
        ReadArgs,
        ReadReply,
        ReleaseArgs,
        ReleaseReply,
        ReleasesArgs,
        ReleasesReply,
        StatArgs,
        StatReply,
        TailArgs,
        TailReply,
        UnlinkCurrentArgs,
        UnlinkCurrentReply,
        WaitForArgs,
        WaitForReply,
        WriteArgs,
        WriteReply,
    )
    from opsrunner.remote.protocol_host import ExecArgs, ExecReply, FactsArgs, FactsReply
    from opsrunner.remote.protocol_jobs import (
        GpuWaitArgs,
        GpuWaitReply,
        KillArgs,
        KillReply,
        LaunchArgs,
        LaunchReply,
        RollbackArgs,
        RollbackReply,
        SelectArgs,
        SelectReply,
        VerifyArgs,
        VerifyReply,
    )

ArgsT = TypeVar("ArgsT")
ReplyT = TypeVar("ReplyT")


class AgentOp(Generic[ArgsT, ReplyT]):
    """An op of the agent (remote/agent.py's OPS) with the types of its request and reply."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"AgentOp({self.name!r})"


KILL: AgentOp[KillArgs, KillReply] = AgentOp("kill")
SELECT: AgentOp[SelectArgs, SelectReply] = AgentOp("select")
LAUNCH: AgentOp[LaunchArgs, LaunchReply] = AgentOp("launch")
VERIFY: AgentOp[VerifyArgs, VerifyReply] = AgentOp("verify")
GPU_WAIT: AgentOp[GpuWaitArgs, GpuWaitReply] = AgentOp("gpu_wait")
CLEAR: AgentOp[ClearArgs, ClearReply] = AgentOp("clear")
STAT: AgentOp[StatArgs, StatReply] = AgentOp("stat")
WRITE: AgentOp[WriteArgs, WriteReply] = AgentOp("write")
DELETE: AgentOp[DeleteArgs, DeleteReply] = AgentOp("delete")
READ: AgentOp[ReadArgs, ReadReply] = AgentOp("read")
TAIL: AgentOp[TailArgs, TailReply] = AgentOp("tail")
FACTS: AgentOp[FactsArgs, FactsReply] = AgentOp("facts")
FS_STAT: AgentOp[FsStatArgs, FsStatReply] = AgentOp("fs_stat")
FS_PUT: AgentOp[FsPutArgs, FsPutReply] = AgentOp("fs_put")
FS_FILE: AgentOp[FsFileArgs, FsFileReply] = AgentOp("fs_file")
LINEINFILE: AgentOp[LineInFileArgs, LineInFileReply] = AgentOp("lineinfile")
WAIT_FOR: AgentOp[WaitForArgs, WaitForReply] = AgentOp("wait_for")
EXEC: AgentOp[ExecArgs, ExecReply] = AgentOp("exec")
# releases and rollback (deploy_code releases: true, rollback)
RELEASES: AgentOp[ReleasesArgs, ReleasesReply] = AgentOp("releases")
RELEASE: AgentOp[ReleaseArgs, ReleaseReply] = AgentOp("release")
ROLLBACK: AgentOp[RollbackArgs, RollbackReply] = AgentOp("rollback")
UNLINK_CURRENT: AgentOp[UnlinkCurrentArgs, UnlinkCurrentReply] = AgentOp("unlink_current")
