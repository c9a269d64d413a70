"""Inventory: hosts, nested groups, vars precedence and host patterns (`--limit`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.validation import load_schema, schema_problems
from opsrunner.yamlsource import PosDict, load_yaml_file

RESERVED_VARS = (
    "connection", "host", "port", "user", "key_file", "known_hosts_file",
    "connect_timeout", "host_key_checking", "wrapper", "python_interpreter",
)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]@]+$")


@dataclass
class Group:
    name: str
    depth: int = 0
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    pos: SourcePos | None = None


@dataclass
class Host:
    name: str
    vars: dict[str, Any] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    pos: SourcePos | None = None


class Inventory:
    """Hosts and groups. Host order is the order of first appearance in the files."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self.groups: dict[str, Group] = {"all": Group("all"), "ungrouped": Group("ungrouped", 1)}
        self.sources: list[str] = []

    # -- building -------------------------------------------------------------------------
    def add_group(self, name: str, parent: str | None, depth: int, pos: SourcePos | None) -> Group:
        group = self.groups.setdefault(name, Group(name, depth, pos=pos))
        group.depth = max(group.depth, depth)
        if parent and name not in self.groups[parent].children:
            self.groups[parent].children.append(name)
        return group

    def add_host(self, name: str, group: str, hostvars: Mapping[str, Any], pos: SourcePos | None) -> None:
        host = self.hosts.setdefault(name, Host(name, pos=pos))
        host.vars.update(hostvars)
        if name not in self.groups[group].hosts:
            self.groups[group].hosts.append(name)

    def finish(self) -> None:
        """Compute each host's groups (ancestors included), sorted shallow to deep."""
        for host in self.hosts.values():
            host.groups = []
        for group in self.groups.values():
            for hostname in self.group_hosts(group.name):
                host = self.hosts[hostname]
                if group.name not in host.groups:
                    host.groups.append(group.name)
        for hostname, host in self.hosts.items():
            if host.groups == ["all"]:
                self.groups["ungrouped"].hosts.append(hostname)
                host.groups.append("ungrouped")
            host.groups.sort(key=lambda g: (self.groups[g].depth, g))

    # -- queries --------------------------------------------------------------------------
    def group_hosts(self, name: str, _seen: frozenset[str] = frozenset()) -> list[str]:
        if name == "all":
            return list(self.hosts)
        group = self.groups[name]
        out = list(group.hosts)
        for child in group.children:
            if child in _seen:
                continue
            for h in self.group_hosts(child, _seen | {name}):
                if h not in out:
                    out.append(h)
        return out

    def var_layers(self, hostname: str) -> list[Mapping[str, Any]]:
        """Lowest precedence first: all < parent groups < child groups < host vars."""
        host = self.hosts[hostname]
        layers: list[Mapping[str, Any]] = [self.groups[g].vars for g in host.groups]
        layers.append(host.vars)
        return layers

    def groups_map(self) -> dict[str, list[str]]:
        return {name: self.group_hosts(name) for name in self.groups}

    def select(self, pattern: str) -> list[str]:
        """Hosts matching an Ansible-style pattern: `a:b` union, `a:&b` intersect, `a:!b` exclude."""
        terms = [t.strip() for t in re.split(r"[:,]", pattern) if t.strip()]
        chosen: list[str] = []
        intersections = [t[1:] for t in terms if t.startswith("&")]
        exclusions = [t[1:] for t in terms if t.startswith("!")]
        for term in terms:
            if term[0] not in "&!":
                chosen += [h for h in self._match_term(term) if h not in chosen]
        if not any(t[0] not in "&!" for t in terms):
            chosen = list(self.hosts)
        for term in intersections:
            keep = set(self._match_term(term))
            chosen = [h for h in chosen if h in keep]
        for term in exclusions:
            drop = set(self._match_term(term))
            chosen = [h for h in chosen if h not in drop]
        return chosen

    def _match_term(self, term: str) -> list[str]:
        if term in ("all", "*"):
            return list(self.hosts)
        if term in self.groups:
            return self.group_hosts(term)
        if term in self.hosts:
            return [term]
        if term.startswith("~"):
            rx = re.compile(term[1:])
            return [h for h in self.hosts if rx.search(h)]
        out: list[str] = []
        for g in fnmatch.filter(self.groups, term):
            out += [h for h in self.group_hosts(g) if h not in out]
        out += [h for h in fnmatch.filter(self.hosts, term) if h not in out]
        return out


def _walk_group(inv: Inventory, name: str, body: Any, parent: str | None, depth: int,
                pos: SourcePos | None, problems: list[Problem], path: str) -> None:
    group = inv.add_group(name, parent, depth, pos)
    if not isinstance(body, dict):
        return
    group.vars.update(body.get("vars") or {})
    hosts = body.get("hosts") or {}
    for hostname, hostvars in hosts.items():
        hpos = hosts.at(hostname) if isinstance(hosts, PosDict) else pos
        if not _NAME_RE.match(hostname):
            problems.append(Problem(hpos or SourcePos(path), f"invalid host name '{hostname}'",
                                    f"{name}.hosts.{hostname}"))
        if hostname in inv.groups:
            problems.append(Problem(hpos or SourcePos(path), f"'{hostname}' is both a host and a group",
                                    f"{name}.hosts.{hostname}"))
        inv.add_host(hostname, name, hostvars or {}, hpos)
    children = body.get("children") or {}
    for child, child_body in children.items():
        cpos = children.at(child) if isinstance(children, PosDict) else pos
        _walk_group(inv, child, child_body, name, depth + 1, cpos, problems, path)


def _inventory_files(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(p for p in source.iterdir() if p.suffix in (".yml", ".yaml") and p.is_file())
    return [source]


def load_inventory(sources: list[Path]) -> Inventory:
    """Load and validate inventory files (or directories of them); all problems at once."""
    inv = Inventory()
    problems: list[Problem] = []
    for source in sources:
        if not source.exists():
            problems.append(Problem(SourcePos(str(source)), "inventory not found"))
            continue
        for path in _inventory_files(source):
            try:
                data = load_yaml_file(path)
            except ValidationError as exc:
                problems += exc.problems
                continue
            inv.sources.append(str(path))
            if data is None:
                continue
            found = schema_problems(data, load_schema("inventory"), str(path))
            if found:
                problems += found
                continue
            for name, body in data.items():
                parent = None if name == "all" else "all"
                _walk_group(inv, name, body, parent, 0 if name == "all" else 1,
                            data.at(name), problems, str(path))
    if problems:
        raise ValidationError(problems)
    inv.finish()
    return inv


def localhost_inventory() -> Inventory:
    """The implicit inventory used when no inventory file exists: just localhost."""
    inv = Inventory()
    inv.add_host("localhost", "all", {}, None)
    inv.finish()
    return inv
