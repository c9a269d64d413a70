"""What an agent session (agent.py) needs of its connection, as protocols: connections/base.py's
Connection has it, and naming these instead of Connection keeps base.py -> agent.py one-way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

from opsrunner.connections.startslots import StartSlots
from opsrunner.connections.streams import Stream
from opsrunner.results import CommandResult


class _HostSpec(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def python(self) -> str: ...

    @property
    def connect_timeout(self) -> float: ...

    @property
    def wrapper(self) -> Sequence[Any]: ...


class AgentHost(Protocol):
    """What an agent session needs of its connection (connections/base.py's Connection has it;
    naming the protocol here instead of Connection keeps base.py -> agent.py one-way)."""

    @property
    def spec(self) -> _HostSpec: ...

    @property
    def slots(self) -> StartSlots: ...

    @property
    def log(self) -> Callable[[str, str], None] | None: ...

    def spawn(self, argv: Sequence[str], shown: str | None = None) -> Stream: ...

    def session_lost(self) -> bool: ...

    def lost_because(self) -> str | None: ...

    def run(self, argv: Sequence[str], *, stdin: bytes | IO[bytes] | None = None,
            timeout: float | None = None, env: Any = None, cwd: str | None = None) -> CommandResult: ...
