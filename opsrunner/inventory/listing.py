"""What `opsrunner inventory` prints: ansible-inventory's --list, --host and --graph.

The shapes, orders and spellings are ansible-core's (checked byte for byte against
ansible-inventory 2.19): --list is JSON sorted by key with a 4-space indent, `all.children`
in definition order with `ungrouped` first, empty groups left out of the mapping (still
named as children); --graph is the `@all:` tree with `  |--` per level, child groups before
hosts, and with --vars each host's merged variables and each group's own, as
`{name = value}` in Python's spelling.

Unlike ansible-inventory, secret values are masked (secrets.py's rules: secret-named
variables, `!secret` values): a listing is often pasted into a ticket or a chat.
`show_secrets` prints them as written (an --export meant to feed another tool).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opsrunner.errors import UsageError
from opsrunner.inventory.model import Inventory
from opsrunner.secrets import MASK, Masker, masker_for

#: ansible-core >= 2.19 names the serialisation profile of its --list output.
PROFILE = "inventory_legacy"


def plain(value: Any) -> Any:
    """A value with the loader's position-carrying containers and tagged strings made plain."""
    if isinstance(value, Mapping):
        return {str(k) if isinstance(k, str) else k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


@dataclass(frozen=True)
class InventoryView:
    """An inventory as listings show it: merged host vars and group vars, secrets masked."""

    inventory: Inventory
    #: None: secrets are shown as written.
    masker: Masker | None
    export: bool = False
    #: One shown copy per inventory value: a value several hosts share (a group's list) stays
    #: one object, so YAML output writes it once with an anchor, as ansible-inventory does.
    _shown: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, inventory: Inventory, export: bool = False, show_secrets: bool = False) -> InventoryView:
        return cls(inventory, None if show_secrets else masker_for(inventory, {}), export)

    def _shown_vars(self, merged: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in merged.items():
            if self.masker is not None and self.masker.is_secret_name(str(key)):
                out[str(key)] = MASK
                continue
            if id(value) not in self._shown:
                shown = plain(value)
                if self.masker is not None:
                    shown = self.masker.mask_vars({"": shown})[""]
                self._shown[id(value)] = (value, shown)
            out[str(key)] = self._shown[id(value)][1]
        return out

    def host_vars(self, name: str) -> dict[str, Any]:
        """The host's variables: every layer merged (or, with export, only its own)."""
        layers: list[Mapping[str, Any]]
        if self.export:
            layers = [self.inventory.hosts[name].vars] + [
                d.hosts[name] for d in self.inventory.vars_dirs if d.beside == "inventory" and name in d.hosts]
        else:
            layers = self.inventory.var_layers(name)
        merged: dict[str, Any] = {}
        for layer in layers:
            merged.update(layer)
        return self._shown_vars(merged)

    def group_vars(self, name: str) -> dict[str, Any]:
        """The group's own variables: its inventory vars, then its group_vars beside the inventory."""
        merged = dict(self.inventory.groups[name].vars)
        for found in self.inventory.vars_dirs:
            if found.beside == "inventory" and name in found.groups:
                merged.update(found.groups[name])
        return self._shown_vars(merged)


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, indent=4)


def _yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, default_flow_style=False, allow_unicode=True))


def _drop_empty(entry: dict[str, Any]) -> None:
    for key in ("hosts", "vars", "children"):
        if key in entry and not entry[key]:
            del entry[key]


def _json_group(view: InventoryView, name: str, available: frozenset[str], seen: set[str]) -> dict[str, Any]:
    group = view.inventory.groups[name]
    out: dict[str, Any] = {name: {}}
    if name != "all":
        out[name]["hosts"] = [h for h in group.hosts if h in available]
    out[name]["children"] = list(group.children)
    for child in group.children:
        if child not in seen:
            out.update(_json_group(view, child, available, seen))
            seen.add(child)
    if view.export:
        out[name]["vars"] = view.group_vars(name)
    _drop_empty(out[name])
    if not out[name]:
        del out[name]
    return out


def _yaml_group(view: InventoryView, name: str, available: frozenset[str], seen: dict[str, set[str]]) -> dict[str, Any]:
    group = view.inventory.groups[name]
    entry: dict[str, Any] = {"children": {}}
    for child in group.children:
        if child in seen["groups"]:
            entry["children"][child] = {}
        else:
            entry["children"].update(_yaml_group(view, child, available, seen))
            seen["groups"].add(child)
    entry["hosts"] = {}
    for host in group.hosts if name != "all" else []:
        if host in available:
            entry["hosts"][host] = {} if host in seen["hosts"] else view.host_vars(host)
            seen["hosts"].add(host)
    if view.export and (gvars := view.group_vars(name)):
        entry["vars"] = gvars
    _drop_empty(entry)
    return {name: entry} if entry else {}


def list_inventory(view: InventoryView, limit: str | None = None, yaml: bool = False) -> str:
    """`--list` (JSON, or with yaml=True the YAML inventory form), hosts narrowed by `limit`."""
    hosts = view.inventory.select(limit) if limit else list(view.inventory.hosts)
    available = frozenset(hosts)
    if yaml:
        return _yaml(_yaml_group(view, "all", available, {"groups": set(), "hosts": set()}))
    data = _json_group(view, "all", available, set())
    meta: dict[str, Any] = {"hostvars": {}, "profile": PROFILE}
    for host in hosts:
        found = view.host_vars(host)
        if found:
            meta["hostvars"][host] = found
    data["_meta"] = meta
    return _json(data) + "\n"


def show_host(view: InventoryView, pattern: str, yaml: bool = False) -> str:
    """`--host H`: the merged variables of the one host the pattern names."""
    hosts = view.inventory.select(pattern) if pattern else []
    if len(hosts) != 1:
        raise UsageError(f"--host needs a pattern naming one host; {pattern!r} names {len(hosts)}")
    found = view.host_vars(hosts[0])
    return _yaml(found) if yaml else _json(found) + "\n"


def _line(text: str, depth: int) -> str:
    return "  |" * depth + "--" + text if depth else text


def _var_lines(variables: Mapping[str, Any], depth: int) -> list[str]:
    return [_line(f"{{{name} = {value}}}", depth) for name, value in sorted(variables.items())]


def _graph_group(view: InventoryView, name: str, depth: int, with_vars: bool) -> list[str]:
    group = view.inventory.groups[name]
    lines = [_line(f"@{name}:", depth)]
    for child in group.children:
        lines += _graph_group(view, child, depth + 1, with_vars)
    for host in group.hosts if name != "all" else []:
        lines.append(_line(host, depth + 1))
        if with_vars:
            lines += _var_lines(view.host_vars(host), depth + 2)
    if with_vars:
        lines += _var_lines(view.group_vars(name), depth + 1)
    return lines


def graph_inventory(view: InventoryView, group: str = "all", with_vars: bool = False) -> str:
    """`--graph [GROUP] [--vars]`: the group tree from GROUP down."""
    if group not in view.inventory.groups:
        raise UsageError(f"--graph takes a group name; there is no group {group!r}")
    return "\n".join(_graph_group(view, group, 0, with_vars)) + "\n"
