"""Tasks and blocks as loaded from a playbook: the types both the playbook loader and modules use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsrunner.errors import SourcePos


@dataclass(frozen=True)
class Role:
    name: str
    path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    name: str
    module: str
    args: dict[str, Any]
    pos: SourcePos
    keywords: dict[str, Any]
    tags: frozenset[str] = frozenset()
    role: Role | None = None
    role_params: dict[str, Any] = field(default_factory=dict)
    base_dir: Path = Path(".")
    #: The include_tasks itself (a `meta: noop`), counted as ansible-core counts it: ok on each
    #: host that reaches it; skipped by its `when`, the included tasks do not show at all.
    include_marker: bool = False
    #: Where the task itself writes each of its keywords (not those it inherits).
    key_pos: dict[str, SourcePos] = field(default_factory=dict)
    #: Where the play writes each keyword the task takes as the play's default (check_mode, ...).
    play_key_pos: dict[str, SourcePos] = field(default_factory=dict)
    #: Its arguments hold no template and were converted and validated at load: checked again
    #: as they are (argcheck.check_args), they need neither again.
    args_checked: bool = False

    def kw(self, key: str, default: Any = None) -> Any:
        return self.keywords.get(key, default)

    def at(self, key: str) -> SourcePos:
        """The position of keyword `key` as the task writes it; the task's own where it inherits it."""
        return self.key_pos.get(key, self.pos)

    @property
    def notify(self) -> list[str]:
        value = self.keywords.get("notify") or []
        return [value] if isinstance(value, str) else list(value)

    def local_path(self, path: str, kind: str = "files") -> Path:
        """A controller-side path: absolute, or found in search_dirs(kind), else the playbook's."""
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            return candidate
        for folder in self.search_dirs(kind):
            if (folder / candidate).exists():
                return folder / candidate
        return self.base_dir / candidate

    def search_dirs(self, kind: str) -> list[Path]:
        """Where a relative path in this task's args resolves: role's files/ then the playbook dir."""
        dirs = [self.role.path / kind] if self.role else []
        if self.role:
            dirs.append(self.role.path)
        dirs.append(self.base_dir)
        return dirs


@dataclass(frozen=True)
class Block:
    """block/rescue/always. Keywords of the block were already merged into its tasks."""

    name: str
    pos: SourcePos
    block: tuple[Node, ...]
    rescue: tuple[Node, ...] = ()
    always: tuple[Node, ...] = ()


Node = Task | Block


def iter_tasks(nodes: tuple[Node, ...] | list[Node]) -> list[Task]:
    """Every task in document order, blocks flattened (block, then rescue, then always)."""
    out: list[Task] = []
    for node in nodes:
        if isinstance(node, Block):
            out += iter_tasks(node.block) + iter_tasks(node.rescue) + iter_tasks(node.always)
        else:
            out.append(node)
    return out
