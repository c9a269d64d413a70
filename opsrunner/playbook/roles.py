"""Roles at load time: found beside the playbook or in the current directory; their defaults,
vars, tasks and handlers are read and checked with the play."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsrunner.errors import SourcePos, ValidationError
from opsrunner.playbook.state import LoaderState
from opsrunner.tasks import Node, Role
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import load_yaml_file, positioned


def role_folders(base_dir: Path) -> tuple[Path, ...]:
    """Where a role named by a playbook in `base_dir` is looked for, in order."""
    return base_dir / "roles", Path.cwd() / "roles", base_dir.parent / "roles"


class RoleLoader(LoaderState):
    def find_role(self, name: str) -> Path | None:
        for folder in role_folders(self.base_dir):
            if (folder / name).is_dir():
                return folder / name
        return None

    def role_tasks(self, ref: Any, pos: SourcePos, path: str, play_tags: frozenset[str],
                   kind: str = "tasks", inherited: dict[str, Any] | None = None) -> list[Node]:
        """The role's task list (`kind` "tasks", the role is then part of the play) or its handlers."""
        name = ref if isinstance(ref, str) else ref["role"]
        params = positioned() if isinstance(ref, str) else positioned(ref.get("vars"))
        tags = play_tags | (frozenset() if isinstance(ref, str) else self.tags_at(ref))
        role_dir = self.find_role(name)
        if role_dir is None:
            if kind == "tasks":
                self.fail(pos, f"role '{name}' not found (searched roles/ next to the playbook "
                          "and in the current directory)", path)
            return []
        role = Role(name, role_dir, self.role_mapping(role_dir / "defaults/main.yml"),
                    self.role_mapping(role_dir / "vars/main.yml"))
        if kind == "tasks":
            self.roles.append(role)
            self.role_refs.append((ref, pos, path, play_tags))
        entry = "main" if isinstance(ref, str) or kind != "tasks" else ref.get("tasks_from", "main")
        main = role_dir / kind / f"{entry}.yml"
        if not main.exists():
            if kind == "tasks":
                self.fail(pos, f"role '{name}' has no tasks/{entry}.yml", path)
            return []
        raw = self.role_file(main)
        if raw is None:
            return []
        self.current_role, outer_role = role, self.current_role
        self.file_stack.append(main)
        try:
            return self.task_list(raw, kind, tags, role, params, base_dir=role_dir, inherited=inherited)
        finally:
            self.current_role = outer_role
            self.file_stack.pop()

    def role_file(self, file: Path) -> list[Any] | None:
        """A role's task (or handler) list, when it loads and has the shape of one."""
        try:
            raw = load_yaml_file(file)
        except ValidationError as exc:
            self.problems += exc.problems
            return None
        if raw is None:
            return None
        schema = load_schema("playbook")
        found = schema_problems(raw, schema["$defs"]["task_list"] | {"$defs": schema["$defs"]}, str(file))
        self.problems += found
        return None if found or not isinstance(raw, list) else raw

    def role_mapping(self, file: Path) -> dict[str, Any]:
        if not file.exists():
            return {}
        try:
            data = load_yaml_file(file)
        except ValidationError as exc:
            self.problems += exc.problems
            return {}
        if data is not None and not isinstance(data, dict):
            self.fail(SourcePos(str(file)), "must hold a mapping of variables")
            return {}
        self.check_templates(data or {}, "")
        return positioned(data)
