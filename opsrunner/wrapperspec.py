"""The inventory's `wrapper` setting, templated so that a value stays one argument.

A wrapper prefix such as `pct exec {{ ctid }} --` is split into words *before* its
templates are rendered, and each word renders to exactly one argument: a `ctid` of
`200 -- /bin/sh -c 'touch X' --` reaches `pct` as one (invalid) container id instead of
smuggling in a command. A word that renders to a list becomes one argument per item.
A setting (or item) that is nothing but `{{ name }}` refers to another variable: that
variable's own text is used under the same rules, so indirection keeps working.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from opsrunner.connections.wrappers import ArgvLayer, Layer, ShellLayer
from opsrunner.templating import LazyVars, render

_SPAN = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
_HELD = re.compile("\x00([0-9]+)\x00")
_REF = re.compile(r"^\s*\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")
MAX_INDIRECTION = 10


def _deref(value: Any, raw: Mapping[str, Any]) -> Any:
    for _ in range(MAX_INDIRECTION):
        match = _REF.match(value) if isinstance(value, str) else None
        if match is None or match.group(1) not in raw:
            return value
        value = raw[match.group(1)]
    raise ValueError("wrapper: too many levels of {{ variable }} indirection")


def template_words(text: str, variables: Mapping[str, Any]) -> list[str]:
    """Split `text` like a shell would, then render each word on its own."""
    spans: list[str] = []

    def hold(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    words = shlex.split(_SPAN.sub(hold, text))
    out: list[str] = []
    for word in words:
        value = render(_HELD.sub(lambda m: spans[int(m.group(1))], word), variables)
        if isinstance(value, list | tuple):
            out.extend(str(v) for v in value)
        else:
            out.append(str(value))
    return out


def _layer(item: Any, variables: LazyVars) -> Layer:
    raw = variables.raw()
    item = _deref(item, raw)
    if isinstance(item, dict):
        return ShellLayer(tuple(template_words(str(_deref(item["shell"], raw)), variables)))
    words = tuple(template_words(str(item), variables))
    if not words:
        raise ValueError("empty wrapper prefix")
    return ArgvLayer(words)


def wrapper_chain(variables: LazyVars) -> tuple[Layer, ...]:
    """The host's exec-wrapper chain, outermost first."""
    value = _deref(variables.raw().get("wrapper"), variables.raw())
    if value in (None, "", []):
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(_layer(item, variables) for item in items)
