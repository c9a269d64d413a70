"""import_playbook, import_tasks/include_tasks and import_role/include_role at load time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsrunner.errors import ValidationError
from opsrunner.includes import include_file
from opsrunner.playbook.keys import INCLUDE_KEYWORDS, INCLUDE_ROLE_KEYS, INCLUDE_TASK_KEYS
from opsrunner.playbook.state import LoaderState
from opsrunner.tasks import Task
from opsrunner.templating import is_template
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import load_yaml_file


class IncludeLoader(LoaderState):
    """The playbook loader's include handling.

    Includes are read when the playbook loads, so every included task is validated before
    any host is touched. include_tasks / include_role therefore behave as import_tasks /
    import_role (docs/ansible.md).
    """

    def import_playbook(self, raw: Any, path: str) -> list[Any]:
        name = raw["import_playbook"]
        file = include_file(name, [self.base_dir])
        if file is None or is_template(name) or file.resolve() in self.importers:
            why = "includes itself" if file is not None and not is_template(name) else "not found"
            self.fail(raw.at("import_playbook"), f"import_playbook '{name}' {why}", f"{path}.import_playbook")
            return []
        try:
            return list(type(self)(file, self.importers).load().plays)
        except ValidationError as exc:
            self.problems += exc.problems
            return []

    def task_list_from_file(self, file: Path, path: str, tags: frozenset[str], role: Any, params: dict[str, Any],
                            base_dir: Path, inherited: dict[str, Any]) -> list[Any] | None:
        try:
            raw = load_yaml_file(file)
        except ValidationError as exc:
            self.problems += exc.problems
            return None
        schema = load_schema("playbook")
        found = schema_problems(raw or [], schema["$defs"]["task_list"] | {"$defs": schema["$defs"]}, str(file))
        self.problems += found
        if found:
            return None
        self.file_stack.append(file)
        try:
            return self.task_list(raw, path, tags, role, params, base_dir, inherited)
        finally:
            self.file_stack.pop()

    def _include_ok(self, raw: Any, key: str, path: str) -> bool:
        bad = [k for k in raw if k != key and k not in INCLUDE_KEYWORDS]
        for k in bad:
            self.fail(raw.at(k), f"'{k}' is not supported on {key} (opsrunner reads included files when "
                      f"it loads the playbook; allowed: {', '.join(sorted(INCLUDE_KEYWORDS))})", f"{path}.{k}")
        return not bad

    def include_tasks(self, raw: Any, path: str, tags: frozenset[str], role: Any, params: dict[str, Any],
                      base_dir: Path, inherited: dict[str, Any]) -> Any:
        key = next(k for k in INCLUDE_TASK_KEYS if k in raw)
        value = raw[key]
        name = value.get("file") if isinstance(value, dict) else value
        if not self._include_ok(raw, key, path):
            return None
        if not isinstance(name, str) or is_template(name):
            self.fail(raw.at(key), f"{key} needs a file name without templates", f"{path}.{key}")
            return None
        dirs = [self.file_stack[-1].parent, base_dir / "tasks", base_dir, self.base_dir]
        file = include_file(name, dirs)
        if file is None or file.resolve() in [f.resolve() for f in self.file_stack]:
            why = "not found" if file is None else "includes itself"
            self.fail(raw.at(key), f"{key} '{name}' {why} (looked in {', '.join(map(str, dirs))})", f"{path}.{key}")
            return None
        _, sub_tags, merged = self.make_block(raw, [], f"{key}: {name}", tags, inherited)
        nodes = self.task_list_from_file(file, f"{path}.{key}", sub_tags, role, params, base_dir, merged)
        if nodes is None:
            return None
        if key == "include_tasks":
            nodes = [_include_marker(raw, f"{key}: {name}", merged, sub_tags, role, base_dir), *nodes]
        return self.make_block(raw, nodes, f"{key}: {name}", tags, inherited)[0]

    def include_role(self, raw: Any, path: str, tags: frozenset[str], inherited: dict[str, Any]) -> Any:
        key = next(k for k in INCLUDE_ROLE_KEYS if k in raw)
        value = raw[key]
        if not self._include_ok(raw, key, path):
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            self.fail(raw.at(key), f"{key} needs `name:` (and optionally tasks_from:)", f"{path}.{key}")
            return None
        ref = {"role": value["name"], "tasks_from": value.get("tasks_from", "main"), "vars": raw.get("vars")}
        _, sub_tags, merged = self.make_block(raw, [], key, tags, inherited)
        merged.pop("vars", None)  # the include's vars are the role's params
        count = len(self.roles)
        nodes = self.role_tasks(ref, raw.pos, f"{path}.{key}", sub_tags, "tasks", merged)
        if key == "include_role":  # as ansible-core: include_role's vars are private, import_role's not
            self.private_roles.update(r.path for r in self.roles[count:])
            nodes = [_include_marker(raw, f"{key}: {value['name']}", merged, sub_tags, None, self.base_dir), *nodes]
        return self.make_block(raw, nodes, f"{key}: {value['name']}", tags, inherited)[0]


def _include_marker(raw: Any, name: str, merged: dict[str, Any], tags: frozenset[str], role: Any,
                    base_dir: Path) -> Task:
    """The include itself, as a task that does nothing: ansible-core counts an include_tasks or
    include_role on each host that reaches it, and one its `when` skips hides its tasks."""
    return Task(name=name, module="meta", args={"action": "noop"}, pos=raw.pos,
                keywords={k: merged[k] for k in ("when", "vars") if k in merged}, tags=tags,
                role=role, base_dir=base_dir, include_marker=True)
