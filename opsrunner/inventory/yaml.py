"""YAML (and JSON) inventory files: top-level groups with hosts, vars and children."""

from __future__ import annotations

import re
from typing import Any

from opsrunner.errors import Problem, SourcePos
from opsrunner.inventory.connvars import connection_var_problems
from opsrunner.inventory.model import Inventory
from opsrunner.inventory.ranges import RangeError, expand_host_range
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import PosDict, key_position

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:@]+$")


def add_host_entry(inv: Inventory, group: str, name: str, hostvars: dict[str, Any], pos: SourcePos,
                   key_path: str, problems: list[Problem]) -> None:
    """One host entry (a ranged name stands for many), checked the same way for YAML and INI."""
    if not _NAME_RE.match(name):
        problems.append(Problem(pos, f"invalid host name '{name}'", key_path))
        return
    problems += connection_var_problems(hostvars, pos, key_path)
    try:
        names = expand_host_range(name)
    except RangeError as exc:
        problems.append(Problem(pos, f"bad host range in '{name}': {exc}", key_path))
        return
    for hostname in names:
        if hostname in inv.groups:
            problems.append(Problem(pos, f"'{hostname}' is both a host and a group", key_path))
            continue
        inv.add_host(hostname, group, hostvars, pos)


def _walk_group(inv: Inventory, name: str, body: Any, parent: str | None, depth: int,
                pos: SourcePos, problems: list[Problem]) -> None:
    group = inv.add_group(name, parent, depth, pos)
    if not isinstance(body, dict):
        return
    group_vars = body.get("vars") or {}
    problems += connection_var_problems(group_vars, pos, f"{name}.vars")
    group.vars.update(group_vars)
    group.var_pos.update({key: key_position(group_vars, key) or pos for key in group_vars})
    hosts = body.get("hosts") or {}
    for hostname, hostvars in hosts.items():
        hpos = hosts.at(hostname) if isinstance(hosts, PosDict) else pos
        add_host_entry(inv, name, str(hostname), hostvars or {}, hpos, f"{name}.hosts.{hostname}", problems)
    children = body.get("children") or {}
    for child, child_body in children.items():
        cpos = children.at(child) if isinstance(children, PosDict) else pos
        _walk_group(inv, child, child_body, name, depth + 1, cpos, problems)


def read_yaml_inventory(inv: Inventory, data: Any, path: str, problems: list[Problem]) -> None:
    """Add the groups and hosts of one parsed YAML inventory document to `inv`."""
    if data is None:
        return
    found = schema_problems(data, load_schema("inventory"), path)
    if found:
        problems += found
        return
    for name, body in data.items():
        pos = data.at(name) if isinstance(data, PosDict) else SourcePos(path)
        _walk_group(inv, name, body, None, 0 if name == "all" else 1, pos, problems)
