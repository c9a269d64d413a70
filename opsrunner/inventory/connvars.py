"""Numeric connection settings, checked where they are written.

The inventory schema checks opsrunner's own `port` and `connect_timeout`; it has no
`ansible_port` or `ansible_ssh_port` (read as aliases of `port`, hostvars.ANSIBLE_ALIASES)
and lets an infinite or NaN `connect_timeout` (YAML `.inf`, `.nan`) through. Such a value is
bad input at its file:line, named as the user wrote it, instead of an internal error (or a
crash) when the host's connection is built."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from opsrunner.errors import Problem, SourcePos
from opsrunner.yamlsource import PosDict


def _is_port(value: Any) -> bool:
    """What the port conversion accepts: an integer 1-65535, or a string of one (ansible-core
    converts `ansible_port: "22"`); unset (None, "") and `{{ templates }}` are left to run time."""
    if value is None or value == "" or (isinstance(value, str) and "{{" in value):
        return True
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return False
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _is_finite(value: Any) -> bool:
    """Whatever is not a float is the schema's to judge."""
    return not isinstance(value, float) or math.isfinite(value)


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "ansible_port": (_is_port, "an integer 1-65535"),
    "ansible_ssh_port": (_is_port, "an integer 1-65535"),
    "connect_timeout": (_is_finite, "a finite number of seconds"),
}


def connection_var_problems(values: Mapping[str, Any], pos: SourcePos, key_path: str) -> list[Problem]:
    """Problems with the numeric connection settings in one mapping of variables. `pos`: where
    they were written, unless `values` (a YAML mapping) knows each key's own position."""
    problems = []
    for key, (valid, what) in _CHECKS.items():
        if key in values and not valid(values[key]):
            where = values.at(key) if isinstance(values, PosDict) else pos
            problems.append(Problem(where, f"{key} must be {what}, got {values[key]!r}",
                                    f"{key_path}.{key}" if key_path else key))
    return problems
