"""Loading inventories: YAML/JSON and INI files, directories of them, `host1,host2,` lists."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.inventory.ini import read_ini_inventory
from opsrunner.inventory.model import Inventory
from opsrunner.inventory.vars_dirs import load_vars_dir
from opsrunner.inventory.yaml import add_host_entry, read_yaml_inventory
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import load_yaml_text, read_utf8

YAML_SUFFIXES = (".yml", ".yaml", ".json")
# Files in an inventory directory that are never inventories (ansible-core's default ignore list).
IGNORED_SUFFIXES = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg",
                    ".retry")


def is_host_list(source: str) -> bool:
    """`-i 'web1,web2,'`: a comma in a value that is not an existing path, as ansible-core's host_list."""
    return "," in source and not Path(source).exists()


def _directory_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and not p.name.endswith(IGNORED_SUFFIXES))


def _read_file(inv: Inventory, path: Path, problems: list[Problem]) -> None:
    try:
        text = read_utf8(path, "inventory")
    except OSError as exc:
        problems.append(Problem(SourcePos(str(path)), f"cannot read inventory: {exc.strerror}"))
        return
    except ValidationError as exc:
        problems += exc.problems
        return
    inv.sources.append(str(path))
    if path.suffix == ".ini":
        read_ini_inventory(inv, text, str(path), problems)
        return
    try:
        data = load_yaml_text(text, str(path))
    except ValidationError as exc:
        if path.suffix in YAML_SUFFIXES:
            problems += exc.problems
            return
        data = None  # an extensionless file that is not YAML: INI, as ansible-core tries next
    if path.suffix in YAML_SUFFIXES or isinstance(data, dict) or not text.strip():
        read_yaml_inventory(inv, data, str(path), problems)
    else:
        read_ini_inventory(inv, text, str(path), problems)


def _read_host_list(inv: Inventory, source: str, problems: list[Problem]) -> None:
    inv.sources.append(source)
    for name in (part.strip() for part in source.split(",")):
        if name:
            add_host_entry(inv, "ungrouped", name, {}, SourcePos("<-i>"), name, problems)


def _check_ini_vars(inv: Inventory, problems: list[Problem]) -> None:
    """Reserved connection vars from INI sources get the same type checks as YAML ones, each
    problem at the line that set the value (`[web:vars]`'s `port=abc`, not just the file)."""
    vars_schema = {"$defs": load_schema("inventory")["$defs"], "$ref": "#/$defs/vars"}
    for group in inv.groups.values():
        problems += _vars_problems(group.vars, group.var_pos, group.pos, vars_schema, [group.name, "vars"])
    for host in inv.hosts.values():
        problems += _vars_problems(host.vars, host.var_pos, host.pos, vars_schema, [host.name])


def _vars_problems(values: dict[str, Any], var_pos: dict[str, SourcePos], pos: SourcePos | None,
                   schema: dict[str, Any], base: list[str]) -> list[Problem]:
    where = pos.file if pos else "<inventory>"
    if not schema_problems(values, schema, where, base):
        return []
    found = []
    for key, value in values.items():  # again key by key, to place each at its own line
        at = var_pos.get(key) or pos or SourcePos(where)
        found += [Problem(at, p.message, p.key_path) for p in schema_problems({key: value}, schema, where, base)]
    return found


def load_inventory(sources: Sequence[Path | str], playbook_dir: Path | None = None) -> Inventory:
    """Load and validate every source, then group_vars/host_vars beside each source and the playbook.

    Every problem is reported at once (ValidationError, exit 4) before any host is contacted."""
    inv = Inventory()
    problems: list[Problem] = []
    roots: list[Path] = []
    for source in sources:
        text = str(source)
        if is_host_list(text):
            _read_host_list(inv, text, problems)
            continue
        path = Path(source)
        if not path.exists():
            problems.append(Problem(SourcePos(text), "inventory not found"))
            continue
        roots.append(path if path.is_dir() else path.parent)
        for file in _directory_files(path) if path.is_dir() else [path]:
            _read_file(inv, file, problems)
    if not problems:
        _check_ini_vars(inv, problems)
    if problems:
        raise ValidationError(problems)
    inv.finish()
    _attach_vars_dirs(inv, roots, playbook_dir, problems)
    if problems:
        raise ValidationError(problems)
    return inv


def _attach_vars_dirs(inv: Inventory, roots: list[Path], playbook_dir: Path | None,
                      problems: list[Problem]) -> None:
    tiers = [(root, "inventory") for root in dict.fromkeys(r.resolve() for r in roots)]
    if playbook_dir is not None:
        tiers.append((playbook_dir.resolve(), "playbook"))
    for root, beside in tiers:
        found = load_vars_dir(root, beside, list(inv.groups), list(inv.hosts), problems)
        if found is not None:
            inv.vars_dirs.append(found)


def localhost_inventory(playbook_dir: Path | None = None) -> Inventory:
    """The implicit inventory used when no inventory file exists: just localhost."""
    inv = Inventory()
    inv.implicit = True
    inv.add_host("localhost", "all", {}, None)
    inv.finish()
    problems: list[Problem] = []
    _attach_vars_dirs(inv, [], playbook_dir, problems)
    if problems:
        raise ValidationError(problems)
    return inv
