"""What a module is, and the context a module runs in."""

from __future__ import annotations

import abc
import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast

from opsrunner.connections.base import Connection
from opsrunner.errors import ModuleFailure
from opsrunner.playbook import Task
from opsrunner.results import CommandResult, Status, TaskResult


@dataclass
class TaskContext:
    """Everything a module may use while running one task on one host."""

    host: str
    task: Task
    connection: Connection
    variables: Mapping[str, Any]
    check_mode: bool = False
    diff_mode: bool = False
    timeout: float | None = None
    notes: list[str] = field(default_factory=list)

    def resolve_local(self, path: str, kind: str = "files") -> Path:
        """A controller-side path: absolute, or found in the role's files/, then the playbook dir."""
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            return candidate
        for folder in self.task.search_dirs(kind):
            if (folder / candidate).exists():
                return folder / candidate
        return self.task.base_dir / candidate

    def agent(self, op: str, request: dict[str, Any], timeout: float | None = None,
              payload: IO[bytes] | None = None) -> dict[str, Any]:
        """Run one operation of the stdlib-only remote agent on the target; return its JSON reply."""
        header = json.dumps({"op": op, "args": request}).encode() + b"\n"
        stdin: bytes | IO[bytes] = header if payload is None else cast(IO[bytes], _Prefixed(header, payload))
        result = self.connection.run(
            agent_argv(self.connection, self.timeout),
            stdin=stdin,
            timeout=timeout if timeout is not None else self.timeout,
        )
        if result.timed_out:
            raise TimedOut(result)
        try:
            reply: dict[str, Any] = json.loads(result.stdout_bytes.splitlines()[-1])
        except (ValueError, IndexError):
            detail = (result.stderr or result.stdout).strip()[-2000:]
            raise ModuleFailure(f"remote agent failed (rc={result.rc}): {detail or 'no output'}") from None
        if reply.get("error"):
            raise ModuleFailure(str(reply["error"]), reply)
        return reply


class _Prefixed(io.RawIOBase):
    """A header followed by a stream, read as one stream (so payloads are never copied whole)."""

    def __init__(self, header: bytes, stream: IO[bytes]) -> None:
        self._header = header
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._header:
            chunk, self._header = self._header, b""
            return chunk
        return self._stream.read(size)


class TimedOut(Exception):
    """A command hit the task timeout; carries the result."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        super().__init__(f"timed out after {result.duration_s:.1f}s")


AGENT_CACHE = "$HOME/.cache/opsrunner"
_INSTALL = (
    'd="' + AGENT_CACHE + '"; f="$d/$1.py"; '
    'if [ ! -f "$f" ]; then mkdir -p "$d" && t="$f.$$" && cat > "$t" && mv -f "$t" "$f" || exit 3; fi; '
    'printf "%s\\n" "$d"'
)


def agent_argv(connection: Connection, timeout: float | None) -> list[str]:
    """How to start the agent on this connection's target.

    The first call per connection stores the agent in ~/.cache/opsrunner on the target
    (one file per version); later calls import it from there, so Python compiles it once
    and caches the bytecode instead of compiling ~30 KB of source on every call. Where
    that cannot be written, the source goes inline with `-c` each time.
    """
    python = connection.spec.python
    if connection.agent_dir is None:
        installed = connection.run(["/bin/sh", "-c", _INSTALL, "opsrunner-install", agent_module()],
                                   stdin=agent_source().encode(), timeout=timeout or 60)
        line = installed.stdout.strip()
        connection.agent_dir = line if installed.rc == 0 and line.startswith("/") else ""
    if connection.agent_dir:
        # -S: the agent needs only the standard library; skipping site saves ~10 ms a call.
        boot = (f"# opsrunner-agent\nimport sys;sys.path.insert(0,{connection.agent_dir!r});"
                f"import {agent_module()} as agent;agent.main()")
        return [python, "-S", "-c", boot]
    return [python, "-S", "-c", agent_source()]


@lru_cache(maxsize=1)
def agent_module() -> str:
    return "opsrunner_agent_" + hashlib.sha256(agent_source().encode()).hexdigest()[:16]


#: The agent's parts, concatenated in this order into one script (procs first: it carries
#: the `opsrunner-agent` marker that kill_old and verify use to never select the agent).
AGENT_PARTS = ("procs", "launch", "verify", "files", "agent")


@lru_cache(maxsize=1)
def agent_source() -> str:
    folder = resources.files("opsrunner").joinpath("remote")
    return "\n".join(folder.joinpath(f"{part}.py").read_text("utf-8") for part in AGENT_PARTS)


class Module(abc.ABC):
    """A task type. Subclasses live one per file and set `name`."""

    name: str = ""

    @abc.abstractmethod
    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        """Do (or, in check mode, predict) the work; raise ModuleFailure on failure."""


def command_result(res: CommandResult, *, changed: bool = True, msg: str = "") -> TaskResult:
    """A TaskResult for a plain command: failed on non-zero rc, timed_out on timeout."""
    if res.timed_out:
        status = Status.TIMED_OUT
        msg = msg or f"timed out after {res.duration_s:.1f}s; the command and its processes were killed"
    elif res.rc != 0:
        status = Status.FAILED
        msg = msg or f"non-zero return code {res.rc}"
    else:
        status = Status.CHANGED if changed else Status.OK
    return TaskResult(status=status, msg=msg, changed=changed and status == Status.CHANGED,
                      rc=res.rc, stdout=res.stdout.removesuffix("\n"),
                      stderr=res.stderr.removesuffix("\n"),
                      data={"cmd": res.command, "delta": round(res.duration_s, 3)})
