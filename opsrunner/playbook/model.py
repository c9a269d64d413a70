"""A loaded playbook: frozen plays that remember where they were written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsrunner.errors import SourcePos
from opsrunner.tasks import Node, Task


@dataclass(frozen=True)
class Play:
    name: str
    hosts: str
    pos: SourcePos
    vars: dict[str, Any]
    tasks: tuple[Node, ...]
    handlers: tuple[Task, ...]
    serial: int | str | list[int | str] | None = None
    any_errors_fatal: bool = False
    strategy: str = "linear"
    force_handlers: bool = False
    gather_facts: bool = False
    max_fail_percentage: float | None = None
    base_dir: Path = Path(".")
    vars_files: tuple[Any, ...] = ()  # templated entries, resolved per host at run time
    role_defaults: dict[str, Any] = field(default_factory=dict)
    no_log: bool | str = False
    timeout: float | str | None = None
    role_vars: dict[str, Any] = field(default_factory=dict)  # visible to every task of the play
    hosts_pos: SourcePos | None = None  # where `hosts:` is written, for a pattern that fails to evaluate
    serial_pos: SourcePos | None = None  # where `serial:` is written, for one that cannot split the hosts
    no_log_pos: SourcePos | None = None  # where `no_log:` is written, for one that is no boolean
    timeout_pos: SourcePos | None = None  # where `timeout:` is written, for a task that takes it as its own
    #: Where each templated tag of the play's tasks (its own, its roles', blocks', ...) is written.
    tag_pos: dict[str, SourcePos] = field(default_factory=dict)
    #: The play's own `tags:` (its tasks inherit them), as written: --list-tags shows them.
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Playbook:
    path: Path
    plays: tuple[Play, ...]


def resolve_playbook_path(name: str, cwd: Path) -> Path:
    """A name that is not a path is looked up in the current directory, then in playbooks/."""
    candidate = Path(name)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    if "/" not in name:
        for folder in (cwd, cwd / "playbooks"):
            if (folder / name).exists():
                return folder / name
    return candidate
