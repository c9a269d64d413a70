"""INI inventory files, parsed as ansible-core's `ini` inventory plugin does.

`[group]` host lines (`name [key=value ...]`, `name:port`, ranges), `[group:vars]`
`key=value` lines, `[group:children]` group names; lines before any section are
`ungrouped` hosts. Values are Python literals where `ast.literal_eval` accepts them
(`n=5` is an int, `b=True` a bool), otherwise strings; host lines are split like a shell.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from opsrunner.errors import Problem, SourcePos
from opsrunner.inventory.connvars import connection_var_problems
from opsrunner.inventory.model import Inventory
from opsrunner.inventory.yaml import add_host_entry

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")
_HOST_PORT = re.compile(r"^(.+?):([0-9]+)$")
#: A host line may open with a host range (`[1:3]-node`, `[a:c].example`): numbers or single letters.
_LEADING_RANGE = re.compile(r"^\[(?:[0-9]*|[A-Za-z]):(?:[0-9]*|[A-Za-z])(?::[^\]]*)?\]")
_SECTION_FORMS = "[group], [group:vars] or [group:children]"
#: NUL and the other control characters (tab aside): no host name or value holds one, as in YAML.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _header_problem(line: str) -> str | None:
    """Why a line that opens with '[' but is no section header is wrong; None where it is a host
    line opening with a range. ansible-core fails these too, some with an internal error
    (`[web`: "not enough values to unpack"), where opsrunner made `[web` a host."""
    if _LEADING_RANGE.match(line):
        return None
    if "]" not in line:
        return f"invalid section header '{line}': no closing ']' (a section is {_SECTION_FORMS})"
    after = line.split("]", 1)[1].strip()
    if after and after[0] not in "#;]":
        return f"invalid section header '{line}': text after ']' (a comment there starts with # or ;)"
    return f"invalid section header '{line}': a section is {_SECTION_FORMS}, with no spaces or other characters"


def parse_value(text: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if value is ... or isinstance(value, complex | bytes | set | tuple):
        return list(value) if isinstance(value, tuple | set) else str(value)
    return value


@dataclass
class _State:
    path: str
    group: str = "ungrouped"
    kind: str = "hosts"
    line: int = 0
    # groups named in [x:vars] or [x:children] before being declared: name -> (line, kind, parents)
    pending: dict[str, tuple[int, str, list[str]]] = field(default_factory=dict)

    def pos(self) -> SourcePos:
        return SourcePos(self.path, self.line, 1)


def _section(inv: Inventory, st: _State, m: re.Match[str], problems: list[Problem]) -> None:
    st.group, kind = m.group(1), m.group(2) or "hosts"
    if kind not in ("hosts", "children", "vars"):
        problems.append(Problem(st.pos(), f"section [{st.group}:{kind}] has unknown type: {kind}"))
        st.kind = "skip"
        return
    st.kind = kind
    if st.group not in inv.groups:
        if kind == "vars" and st.group not in st.pending:
            st.pending[st.group] = (st.line, "vars", [])
        inv.add_group(st.group, None, 1, st.pos())  # under `all` at finish() unless a child
    if st.group in st.pending and kind != "vars":
        _, pending_kind, parents = st.pending.pop(st.group)
        for parent in parents if pending_kind == "children" else []:
            inv.add_group(st.group, parent, 2, st.pos())


def _host_line(inv: Inventory, st: _State, line: str, problems: list[Problem]) -> None:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        problems.append(Problem(st.pos(), f"cannot parse host line '{line}': {exc}"))
        return
    if not tokens:
        return
    name, hostvars = tokens[0], {}
    m = _HOST_PORT.match(name)
    if m and not name.endswith("]"):
        name, hostvars["port"] = m.group(1), int(m.group(2))
    elif name.endswith(":"):
        problems.append(Problem(st.pos(), f"invalid host pattern '{name}': ':' is reserved for a port"))
        return
    for token in tokens[1:]:
        if "=" not in token:
            problems.append(Problem(st.pos(), f"expected key=value host variable, got '{token}'", name))
            return
        key, value = token.split("=", 1)
        hostvars[key] = parse_value(value)
    add_host_entry(inv, st.group, name, hostvars, st.pos(), f"{st.group}.{name}", problems)


def _vars_line(inv: Inventory, st: _State, line: str, problems: list[Problem]) -> None:
    if "=" not in line:
        problems.append(Problem(st.pos(), f"expected key=value, got '{line}'", f"{st.group}:vars"))
        return
    key, value = (part.strip() for part in line.split("=", 1))
    group = inv.groups[st.group]
    group.vars[key], group.var_pos[key] = parse_value(value), st.pos()
    problems += connection_var_problems({key: group.vars[key]}, st.pos(), f"{st.group}.vars")


def _child_line(inv: Inventory, st: _State, line: str, problems: list[Problem]) -> None:
    m = _GROUP_NAME.match(line)
    if not m:
        problems.append(Problem(st.pos(), f"expected a group name, got '{line}'", f"{st.group}:children"))
        return
    child = m.group(1)
    if child in inv.groups:
        inv.add_group(child, st.group, 2, st.pos())
    else:
        _, _, parents = st.pending.setdefault(child, (st.line, "children", []))
        parents.append(st.group)


def read_ini_inventory(inv: Inventory, text: str, path: str, problems: list[Problem]) -> None:
    st = _State(path)
    handlers = {"hosts": _host_line, "vars": _vars_line, "children": _child_line}
    for st.line, raw in enumerate(text.splitlines(), start=1):
        bad = _CONTROL.search(raw)
        if bad:
            problems.append(Problem(SourcePos(path, st.line, bad.start() + 1),
                                    f"unacceptable character #x{ord(bad.group()):04x}: control characters "
                                    "are not allowed"))
            continue
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = _SECTION.match(line)
        header = None if m or line[0] != "[" else _header_problem(line)
        if m:
            _section(inv, st, m, problems)
        elif header:
            problems.append(Problem(st.pos(), header))
            st.kind = "skip"  # its lines belong to no known section: no problems of theirs
        elif st.kind != "skip":
            handlers[st.kind](inv, st, line, problems)
    for name, (line_no, kind, parents) in st.pending.items():
        where = SourcePos(path, line_no, 1)
        if kind == "vars":
            problems.append(Problem(where, f"section [{name}:vars] names undefined group '{name}'"))
        else:
            problems.append(Problem(where, f"section [{parents[-1]}:children] includes undefined group '{name}'"))
