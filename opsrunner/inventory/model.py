"""The inventory model: hosts, nested groups, and each host's variable layers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opsrunner.errors import SourcePos
from opsrunner.inventory.patterns import select_hosts
from opsrunner.yamlsource import PosDict, key_position

RESERVED_VARS = (
    "connection", "host", "port", "user", "key_file", "known_hosts_file",
    "connect_timeout", "host_key_checking", "wrapper", "python_interpreter",
)


@dataclass
class Group:
    name: str
    depth: int = 0
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    pos: SourcePos | None = None
    #: Where each of `vars` was set, where the source tells (a YAML key, INI `[group:vars]` lines).
    var_pos: dict[str, SourcePos] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vars = _telling(self.vars, self.var_pos)


@dataclass
class Host:
    name: str
    vars: dict[str, Any] = field(default_factory=dict)
    #: Every group the host is in, ancestors included: `all` first, then sorted by name
    #: (`group_names` is this list, as ansible-core's sorted one). Set by Inventory.finish().
    groups: list[str] = field(default_factory=list)
    pos: SourcePos | None = None
    #: Where each of `vars` was set: the key that set it last (an INI host line: that line).
    var_pos: dict[str, SourcePos] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vars = _telling(self.vars, self.var_pos)


def _telling(values: dict[str, Any], var_pos: dict[str, SourcePos]) -> PosDict:
    """The vars as a layer that tells where each was set (var_pos, shared: kept up to date)."""
    layer = PosDict(values)
    layer.pos, layer.key_pos = SourcePos(""), var_pos
    return layer


@dataclass
class VarsDir:
    """The `group_vars/` and `host_vars/` found in one directory (beside an inventory or a playbook)."""

    root: str
    beside: str  # "inventory" or "playbook": the two precedence tiers
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)


class Inventory:
    """Hosts and groups. Host order is the order of first appearance in the sources."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        # `ungrouped` is the first child of `all`, as in ansible-core (listings show that order).
        self.groups: dict[str, Group] = {"all": Group("all", children=["ungrouped"]),
                                         "ungrouped": Group("ungrouped", 1)}
        self.sources: list[str] = []
        #: No inventory was read: the implicit localhost alone (inventory/loader.py).
        self.implicit = False
        self.vars_dirs: list[VarsDir] = []

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
        if pos is not None:
            host.var_pos.update({key: key_position(hostvars, key) or pos for key in hostvars})
        if name not in self.groups[group].hosts:
            self.groups[group].hosts.append(name)

    def finish(self) -> None:
        """Compute each host's groups (ancestors included): `all`, then the others by name.

        A group no other group names as a child becomes a child of `all`, after the ones the
        sources put there, in the order the groups were defined (ansible-core's reconcile)."""
        named = {child for group in self.groups.values() for child in group.children}
        self.groups["all"].children += [g for g in self.groups if g != "all" and g not in named]
        self._fix_depths("all", 0, frozenset())
        for host in self.hosts.values():
            host.groups = []
        for group in self.groups.values():
            for hostname in self.group_hosts(group.name):
                host = self.hosts[hostname]
                if group.name not in host.groups:
                    host.groups.append(group.name)
        for hostname, host in self.hosts.items():
            if host.groups == ["all"] and hostname not in self.groups["ungrouped"].hosts:
                self.groups["ungrouped"].hosts.append(hostname)
                host.groups.append("ungrouped")
            elif "ungrouped" in host.groups and len(host.groups) > 2:
                host.groups.remove("ungrouped")  # placed in a real group later in the sources
                self.groups["ungrouped"].hosts.remove(hostname)
            host.groups.sort(key=lambda g: (g != "all", g))

    def _fix_depths(self, name: str, depth: int, seen: frozenset[str]) -> None:
        group = self.groups[name]
        group.depth = max(group.depth, depth)
        children = group.children if name != "all" else [g for g in self.groups if g != "all"]
        for child in children:
            if child not in seen and child != name:
                self._fix_depths(child, depth + 1, seen | {name})

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
        """Lowest precedence first, in ansible-core's default order (checked side by side):

        inventory `all` < the host's other groups in the inventory files (parent before
        child, then by name) < group_vars/all (beside the inventory, then the playbook)
        < group_vars of the other groups (beside the inventory, then the playbook)
        < host vars in the inventory files < host_vars beside the inventory < beside the playbook."""
        host = self.hosts[hostname]
        tiers = [d for d in self.vars_dirs if d.beside == "inventory"] + \
                [d for d in self.vars_dirs if d.beside == "playbook"]
        others = sorted((g for g in host.groups if g != "all"), key=lambda g: (self.groups[g].depth, g))
        layers: list[Mapping[str, Any]] = [self.groups["all"].vars]
        layers += [self.groups[g].vars for g in others]
        layers += [d.groups["all"] for d in tiers if "all" in d.groups]
        layers += [d.groups[g] for d in tiers for g in others if g in d.groups]
        layers.append(host.vars)
        layers += [d.hosts[hostname] for d in tiers if hostname in d.hosts]
        return layers

    def groups_map(self) -> dict[str, list[str]]:
        return {name: self.group_hosts(name) for name in self.groups}

    def select(self, pattern: str | Sequence[str]) -> list[str]:
        """Hosts matching an Ansible host pattern (see opsrunner.inventory.patterns)."""
        return select_hosts(self, pattern)
