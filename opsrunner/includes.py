"""Files a playbook pulls in: vars_files (first-found lists, templated per host), and the
task files of import_tasks/include_tasks and import_role/include_role, read at load time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import TemplateError, ValidationError
from opsrunner.templating import is_template, render
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import load_yaml_file

INCLUDE_TASK_KEYS = ("import_tasks", "include_tasks")
INCLUDE_ROLE_KEYS = ("import_role", "include_role")
#: What an include item may carry besides the include itself (applied to every included task).
INCLUDE_KEYWORDS = frozenset({"name", "when", "tags", "vars", "become", "become_user", "become_method",
                              "environment", "ignore_errors", "check_mode", "diff", "run_once",
                              "delegate_to"})


def entry_names(entry: Any) -> list[str]:
    """A vars_files entry: a file name, or a list whose first existing file is used."""
    return [str(e) for e in entry] if isinstance(entry, list) else [str(entry)]


def is_dynamic(entry: Any) -> bool:
    return any(is_template(name) for name in entry_names(entry))


def read_vars_file(path: Path) -> dict[str, Any]:
    """A YAML/JSON file of variables; ValidationError (with file:line) when it is broken."""
    data = load_yaml_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TemplateError(f"vars file {path} must hold a mapping of variables")
    return dict(data)


def first_found(entry: Any, base_dir: Path, variables: Mapping[str, Any] | None = None) -> Path | None:
    """The first file of the entry that exists (names templated with `variables` when given)."""
    for name in entry_names(entry):
        rendered = str(render(name, variables)) if variables is not None else name
        path = Path(rendered).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if path.is_file():
            return path
    return None


def load_dynamic_vars_files(entries: Sequence[Any], base_dir: Path,
                            variables: Mapping[str, Any]) -> dict[str, Any]:
    """Templated vars_files entries, resolved for one host (as ansible-core does per host)."""
    out: dict[str, Any] = {}
    for entry in entries:
        path = first_found(entry, base_dir, variables)
        if path is None:
            tried = ", ".join(str(render(n, variables)) for n in entry_names(entry))
            raise TemplateError(f"vars_files: none of these files exists: {tried}")
        try:
            out.update(read_vars_file(path))
        except ValidationError as exc:
            raise TemplateError(str(exc.problems[0])) from None
    return out


def include_file(name: str, dirs: Sequence[Path]) -> Path | None:
    """An included task file: absolute, or relative to the including file's folder, then the others."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path if path.is_file() else None
    for folder in dirs:
        if (folder / path).is_file():
            return folder / path
    return None


class IncludeLoader:
    """The playbook loader's include handling (mixed into it; it supplies the stubs below).

    Includes are read when the playbook loads, so every included task is validated before
    any host is touched. include_tasks / include_role therefore behave as import_tasks /
    import_role (README, "Ansible users").
    """

    path: Path
    base_dir: Path
    file_stack: list[Path]
    private_roles: set[Path]
    roles: list[Any]
    importers: tuple[Path, ...]
    problems: list[Any]

    def fail(self, pos: Any, message: str, key_path: str = "") -> None:
        raise NotImplementedError

    def task_list(self, raw: Any, path: str, tags: frozenset[str], role: Any, params: dict[str, Any] | None = None,
                  base_dir: Path | None = None, inherited: dict[str, Any] | None = None) -> list[Any]:
        raise NotImplementedError

    def import_playbook(self, raw: Any, path: str) -> list[Any]:
        name = raw["import_playbook"]
        file = include_file(name, [self.base_dir])
        if file is None or is_template(name) or file.resolve() in self.importers:
            why = "includes itself" if file is not None and not is_template(name) else "not found"
            self.fail(raw.at("import_playbook"), f"import_playbook '{name}' {why}", f"{path}.import_playbook")
            return []
        try:
            return list(type(self)(file, self.importers).load().plays)  # type: ignore[call-arg,attr-defined]
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

    def role_tasks(self, ref: Any, pos: Any, path: str, play_tags: frozenset[str], kind: str = "tasks",
                   inherited: dict[str, Any] | None = None) -> list[Any]:
        raise NotImplementedError

    def make_block(self, raw: Any, nodes: list[Any], name: str, tags: frozenset[str],
                   inherited: dict[str, Any]) -> tuple[Any, frozenset[str], dict[str, Any]]:
        raise NotImplementedError

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
        return None if nodes is None else self.make_block(raw, nodes, f"{key}: {name}", tags, inherited)[0]

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
        return self.make_block(raw, nodes, f"{key}: {value['name']}", tags, inherited)[0]
