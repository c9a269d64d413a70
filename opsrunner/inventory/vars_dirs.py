"""`group_vars/` and `host_vars/` directories, found beside an inventory and beside a playbook.

For a group or host NAME, the first of `NAME` (a file, or a directory whose YAML/JSON files
are read in sorted order, subdirectories included), `NAME.yml`, `NAME.yaml`, `NAME.json`
that exists is used - ansible-core's lookup order, where a directory shadows a file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.inventory.connvars import connection_var_problems
from opsrunner.inventory.model import VarsDir
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import load_yaml_file, positioned

EXTENSIONS = ("", ".yml", ".yaml", ".json")


def _files_for(folder: Path, name: str) -> list[Path]:
    for ext in EXTENSIONS:
        candidate = folder / f"{name}{ext}"
        if candidate.is_dir():
            return sorted(p for p in candidate.rglob("*")
                          if p.is_file() and p.suffix in EXTENSIONS and not p.name.startswith("."))
        if candidate.is_file():
            return [candidate]
    return []


def _read_vars(files: Iterable[Path], problems: list[Problem]) -> dict[str, Any]:
    merged = positioned()
    vars_schema = {"$defs": load_schema("inventory")["$defs"], "$ref": "#/$defs/vars"}
    for path in files:
        try:
            data = load_yaml_file(path)
        except ValidationError as exc:
            problems += exc.problems
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(Problem(getattr(data, "pos", SourcePos(str(path))),
                                    f"a vars file must be a mapping of names to values, not {type(data).__name__}"))
            continue
        found = schema_problems(data, vars_schema, str(path))
        found += connection_var_problems(data, getattr(data, "pos", SourcePos(str(path))), "")
        if found:
            problems += found
            continue
        merged = positioned(merged, data)
    return merged


def load_vars_dir(root: Path, beside: str, groups: Iterable[str], hosts: Iterable[str],
                  problems: list[Problem]) -> VarsDir | None:
    """The group and host vars under `root` for the given names; None when `root` has neither dir."""
    group_dir, host_dir = root / "group_vars", root / "host_vars"
    if not group_dir.is_dir() and not host_dir.is_dir():
        return None
    found = VarsDir(str(root), beside)
    for name in groups:
        files = _files_for(group_dir, name)
        if files:
            found.groups[name] = _read_vars(files, problems)
    for name in hosts:
        files = _files_for(host_dir, name)
        if files:
            found.hosts[name] = _read_vars(files, problems)
    return found
