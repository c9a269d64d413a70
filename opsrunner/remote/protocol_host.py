"""The messages of the ops on the host itself (protocol.py has the table and the framing):
facts (setup) and exec (shell, command: a command run on the host)."""

from __future__ import annotations

# For mypy only, as protocol.py's types: nothing below runs on the agent.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from .protocol import ErrorReply

    # -- setup --------------------------------------------------------------------------------
    class FactsArgs(TypedDict):
        pass

    class PythonVersion(TypedDict):
        major: int
        minor: int
        micro: int

    class PythonFacts(TypedDict):
        executable: str
        version: PythonVersion

    class NvidiaGpu(TypedDict):
        index: int
        name: str
        uuid: str
        memory_total_mb: int
        memory_used_mb: int
        utilization_pct: int | None

    class Facts(TypedDict):
        hostname: str
        fqdn: str
        nodename: str
        user_id: str
        user_uid: int
        user_dir: str
        system: str
        kernel: str
        architecture: str
        distribution: str
        distribution_version: str
        os_family: str
        processor_vcpus: int | None
        python_version: str
        python: PythonFacts
        nvidia_gpus: list[NvidiaGpu]

    class FactsReply(ErrorReply):
        facts: Facts

    # -- shell, command -----------------------------------------------------------------------
    class _ExecArgsBase(TypedDict):
        argv: list[str]

    class ExecArgs(_ExecArgsBase, total=False):
        """The command's stdin is the request's payload."""
        cwd: str | None
        timeout: float | None

    class _ExecReplyBase(TypedDict):
        #: The output's bytes as latin-1 text (bytes through JSON, unchanged).
        stdout: str
        stderr: str
        warnings: list[str]
        rc: int
        #: The command ran past its timeout and was killed with its tree (rc 124).
        timed_out: bool

    class ExecReply(_ExecReplyBase, total=False):
        """ErrorReply's keys, but timed_out always there."""
        error: str
        refused: list[str]
        #: Bytes read past the kept 16 MiB of each stream.
        dropped_stdout: int
        dropped_stderr: int
