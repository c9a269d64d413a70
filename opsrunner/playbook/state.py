"""What the parts of the playbook loader share: the file being read, the play being built,
and every problem found so far (all of them are reported at once, none stops the load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsrunner.envnames import written_problems
from opsrunner.errors import Problem, SourcePos
from opsrunner.playbook.keys import tags_of
from opsrunner.playbook.model import Playbook
from opsrunner.tasks import Block, Node, Role
from opsrunner.templating import check_expression, check_syntax, is_template
from opsrunner.yamlsource import PosDict, PosList


class LoaderState:
    """The loader's state and its checks; plays.py, task_lists.py, roles.py and includes.py
    add what each reads, and are joined into one loader in plays.py. The parts call each other
    (a task list holds includes and roles, which hold task lists) through the methods below,
    which this base, last in the loader's method order, only declares."""

    def __init__(self, path: Path, importers: tuple[Path, ...] = ()) -> None:
        self.path = path
        self.importers = (*importers, path.resolve())  # import_playbook chain, to refuse cycles
        self.file_stack = [path]
        self.role_refs: list[tuple[Any, SourcePos, str, frozenset[str]]] = []
        self.private_roles: set[Path] = set()  # include_role: its vars stay with its own tasks
        self.base_dir = path.parent.resolve()
        self.problems: list[Problem] = []
        self.roles: list[Role] = []
        self.current_role: Role | None = None
        self.play_defaults: dict[str, Any] = {}
        self.play_default_pos: dict[str, SourcePos] = {}  # where the play writes each of them
        #: Task-list entries with a shape problem (`tags: 5`): reported, never built (plays.py).
        self.broken_nodes: set[str] = set()
        #: Where each templated tag of the play being built is first written (Play.tag_pos).
        self.tag_pos: dict[str, SourcePos] = {}

    def fail(self, pos: SourcePos, message: str, key_path: str = "") -> None:
        self.problems.append(Problem(pos, message, key_path))

    def check_templates(self, value: Any, path: str, parent: Any = None, key: Any = None) -> None:
        """Every template string inside a value must parse (rendering waits for the run)."""
        if isinstance(value, str):
            err = check_syntax(value)
            if err:
                pos = parent.at(key) if isinstance(parent, (PosDict, PosList)) and key is not None \
                    else getattr(parent, "pos", SourcePos(str(self.path)))
                self.fail(pos, err, path)
        elif isinstance(value, dict):
            for k, v in value.items():
                holder = value if isinstance(value, PosDict) else parent
                self.check_templates(v, f"{path}.{k}" if path else k, holder, k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.check_templates(v, f"{path}[{i}]", value if isinstance(value, PosList) else parent, i)

    def check_environment(self, raw: PosDict, path: str) -> None:
        """A play's, block's, include's or task's `environment:` as written (envnames.py): told
        here, with its line and key, not when the task runs, after earlier tasks changed hosts."""
        if "environment" in raw:
            self.problems += written_problems(raw["environment"], raw.at("environment"), f"{path}.environment")

    def tags_at(self, raw: Any) -> frozenset[str]:
        """The tags a play, role reference, block, include or task writes; a templated one is
        rendered only when the play runs, and told at the line that writes it if it cannot be."""
        tags = tags_of(raw.get("tags"))
        for tag in tags:
            if is_template(tag):
                self.tag_pos.setdefault(tag, raw.at("tags") if isinstance(raw, PosDict) else SourcePos(str(self.path)))
        return tags

    def check_expression(self, expression: Any, pos: SourcePos, path: str) -> None:
        """A bare expression (`when:`, `assert: that:`, `debug: var:`) must parse as one."""
        err = check_expression(expression) if isinstance(expression, str) else None
        if err:
            self.fail(pos, err, path)

    # -- what the other parts provide ------------------------------------------------------
    def load(self) -> Playbook:
        raise NotImplementedError

    def task_list(self, raw: Any, path: str, tags: frozenset[str], role: Role | None,
                  params: dict[str, Any] | None = None, base_dir: Path | None = None,
                  inherited: dict[str, Any] | None = None) -> list[Node]:
        raise NotImplementedError

    def role_tasks(self, ref: Any, pos: SourcePos, path: str, play_tags: frozenset[str],
                   kind: str = "tasks", inherited: dict[str, Any] | None = None) -> list[Node]:
        raise NotImplementedError

    def include_tasks(self, raw: Any, path: str, tags: frozenset[str], role: Any, params: dict[str, Any],
                      base_dir: Path, inherited: dict[str, Any]) -> Any:
        raise NotImplementedError

    def include_role(self, raw: Any, path: str, tags: frozenset[str], inherited: dict[str, Any]) -> Any:
        raise NotImplementedError

    def make_block(self, raw: Any, nodes: list[Any], name: str, tags: frozenset[str],
                   inherited: dict[str, Any]) -> tuple[Block, frozenset[str], dict[str, Any]]:
        raise NotImplementedError
