"""The agent's wire protocol, used by both ends: the controller (connections/agent.py) and
the agent on the target (server.py, wire.py). Standard library only, and cheap to import.

The agent writes MAGIC, then frames: 1 kind byte + 4-byte big-endian length + body.
  J  a JSON object: the hello (agent -> controller), a request, or a reply
  A  (empty) the agent has read a request: from here on it may run
  K  a reply after which the worker that made it serves the next request (server.py)
  D  a chunk of a request's payload (controller -> agent), E  the end of that payload
The hello carries PROTOCOL and the agent's version: the digest of its package's sources
(package_digest_input), which the controller computes the same way over the artifact it
ships. An agent of another version is never spoken to: the controller ships its own.

This module holds the framing, the handshake and the envelope of every message (Request,
ErrorReply). The ops (agent.py's OPS), each a request type and a reply type, are typed for
mypy only, one module per family: protocol_jobs.py (a job's processes), protocol_files.py
(files on the target), protocol_host.py (the host's facts, and commands run on it):

  op          request         reply            in              what asks for it
  kill        KillArgs        KillReply        protocol_jobs   kill_old
  select      SelectArgs      SelectReply      protocol_jobs   (the process selection alone)
  launch      LaunchArgs      LaunchReply      protocol_jobs   launch_detached
  verify      VerifyArgs      VerifyReply      protocol_jobs   verify
  gpu_wait    GpuWaitArgs     GpuWaitReply     protocol_jobs   kill_old (wait_gpu_free)
  clear       ClearArgs       ClearReply       protocol_files  clear_cache
  stat        StatArgs        StatReply        protocol_files  deploy_code
  write       WriteArgs       WriteReply       protocol_files  deploy_code (a tar stream as the payload)
  delete      DeleteArgs      DeleteReply      protocol_files  deploy_code (delete: true)
  read        ReadArgs        ReadReply        protocol_files  deploy_code (diff)
  tail        TailArgs        TailReply        protocol_files  opsrunner logs
  fs_stat     FsStatArgs      FsStatReply      protocol_files  stat
  fs_put      FsPutArgs       FsPutReply       protocol_files  copy, template
  fs_file     FsFileArgs      FsFileReply      protocol_files  file
  lineinfile  LineInFileArgs  LineInFileReply  protocol_files  lineinfile
  wait_for    WaitForArgs     WaitForReply     protocol_files  wait_for
  facts       FactsArgs       FactsReply       protocol_host   setup
  exec        ExecArgs        ExecReply        protocol_host   shell, command (the payload is the command's stdin)
  releases    ReleasesArgs    ReleasesReply    protocol_files  deploy_code (releases: true), rollback (the list)
  release     ReleaseArgs     ReleaseReply     protocol_files  deploy_code (releases: true; a tar stream as the payload)
  rollback    RollbackArgs    RollbackReply    protocol_jobs   rollback (stop, switch, relaunch the good run, verify)
  unlink_current  UnlinkCurrentArgs  UnlinkCurrentReply  protocol_files
              deploy_code (a plain deploy: remove the `current` of a release that no longer runs)
  job_lock    LockRequest     LockReply        job_locks       job_lock, kill_old, launch_detached (the agent answers)
  job_unlock  {"path"}        LockReply        job_locks       job_lock (state: unlocked)
  beat        {}              {}               job_locks       the controller, every lease/4 while a lock is held

Every reply may carry ErrorReply's keys instead of (or besides) its own.
"""

from __future__ import annotations

MAGIC = b"\0opsrunner-agent\0"
PROTOCOL = 2
#: Written by the start script when the target's cache has no copy of this version.
NEED_SOURCE = b"\0opsrunner-agent-needs-source\0"
#: The package's name on the target (importable without the controller's `opsrunner`).
PACKAGE = "opsrunner_agent"

HEAD_SIZE = 5
MAX_JSON = 64 << 20  # bounded reads: a larger frame is a protocol error, never buffered
MAX_DATA = 1 << 20
#: The controller's payload chunks (D frames) are at most this big.
CHUNK = MAX_DATA

JSON, ACK, KEEP, DATA, END = b"J", b"A", b"K", b"D", b"E"
#: Ops the agent's own process answers, never a worker (job_locks.py): a job lock lives as
#: long as the agent does, and any request (a beat, when idle) renews its lease. job_held
#: says which of the given locks this agent holds (the controller's check after a pause).
LOCK_OPS = ("job_lock", "job_unlock", "beat", "job_held")


def frame(kind: bytes, body: bytes) -> bytes:
    return kind + len(body).to_bytes(4, "big") + body


def frame_size(head: bytes) -> int:
    """The body's length announced by a frame's 5-byte head."""
    return int.from_bytes(head[1:5], "big")


def package_digest_input(sources: dict[str, bytes]) -> bytes:
    """What the agent's version digests: each module's file name and bytes, sorted by name."""
    return b"".join(name.encode("utf-8") + b"\0" + sources[name] + b"\0" for name in sorted(sources))


# -- the envelope's types ---------------------------------------------------------------------
# For mypy only: TYPE_CHECKING is False when the agent runs, so nothing below is executed and
# the agent never imports typing (nor do the protocol_* modules of the ops' types run there).
# Each op's request is `<Op>Args` and its reply `<Op>Reply` (the table in the module
# docstring). Every reply may also carry ErrorReply's keys: an op that fails raises, and the
# dispatcher (agent.py) replies {"error": ...} alone ("refused" too for a guard's refusal);
# the server (server.py) replies {"timed_out": true, "error": ...} for an op that ran past
# its deadline.
#
# The types describe the values as the agent builds them. JSON changes two things on the way
# to the controller: a tuple arrives as a list (verify's Check), and an int key as a string
# (GpuMemory, and Check's GPU reading).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Literal, TypedDict, Union

    #: A value as JSON carries it: only where a field is free-form.
    JSONValue = Union[str, int, float, bool, None, List["JSONValue"], Dict[str, "JSONValue"]]
    JSONObject = Dict[str, JSONValue]

    class ErrorReply(TypedDict, total=False):
        """Keys any reply may carry: why the op failed, the guard rules that refused it, and
        whether it was stopped at its deadline."""
        error: str
        refused: list[str]
        timed_out: bool

    class Request(TypedDict):
        """One request frame (J) from the controller: an op, its args, its deadline, and
        whether a payload (D frames, then E) follows."""
        op: str
        args: JSONObject
        timeout: float | None
        payload: bool

    #: The ops' names (agent.py's OPS).
    OpName = Literal["kill", "select", "launch", "verify", "gpu_wait", "clear", "stat", "write", "delete",
                     "read", "tail", "facts", "fs_stat", "fs_put", "fs_file", "lineinfile", "wait_for", "exec"]
