"""Files a playbook pulls in: vars_files (first-found lists, templated per host) and included
task files (found here; read by the loader's includes part, opsrunner/playbook/includes.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, TemplateError, ValidationError
from opsrunner.templating import is_template, render
from opsrunner.yamlsource import load_yaml_file, positioned


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
    return positioned(data)


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
    out = positioned()
    for entry in entries:
        path = first_found(entry, base_dir, variables)
        if path is None:
            tried = ", ".join(str(render(n, variables)) for n in entry_names(entry))
            raise TemplateError(f"vars_files: none of these files exists: {tried}")
        try:
            out = positioned(out, read_vars_file(path))
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


def vars_file_problems(name: str, dirs: Sequence[Path], pos: SourcePos, key: str) -> list[Problem]:
    """include_vars' file found and read as the task will read it (`dirs`: where a relative name
    is looked up): why it cannot be, located in that file or at `pos`, the task's `file`."""
    found = include_file(name, dirs)
    if found is None:
        looked = "" if Path(name).expanduser().is_absolute() else f" (looked in {', '.join(map(str, dirs))})"
        return [Problem(pos, f"include_vars file '{name}' not found{looked}", key)]
    try:
        read_vars_file(found)
    except ValidationError as exc:
        return [Problem(p.pos, f"{p.message} (in the include_vars file at {pos})", key) for p in exc.problems]
    except TemplateError as exc:
        return [Problem(pos, exc.bare_message, key)]
    return []
