"""Host patterns as ansible-core evaluates them.

`a,b` or `a:b` union, `&b` intersection, `!b` exclusion (applied after every plain term),
`~regex` (anchored at the start, like `re.match`), shell globs over group and host names,
and subscripts on a term: `group[0]`, `group[-1]`, `group[1:]`, `group[0:2]` (inclusive).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from opsrunner.errors import UsageError

_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+):([0-9]*))\]$")
_COLON_TERMS = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")


class PatternError(UsageError):
    """A host pattern that cannot be evaluated (bad regex, subscript out of range)."""


class HostSource(Protocol):
    """What pattern evaluation needs from an inventory."""

    @property
    def hosts(self) -> Mapping[str, object]: ...

    @property
    def groups(self) -> Mapping[str, object]: ...

    def group_hosts(self, name: str) -> list[str]: ...


def split_host_pattern(pattern: str | Sequence[str]) -> list[str]:
    """`'a,b[1], c[2:3]'` -> `['a', 'b[1]', 'c[2:3]']`; a list is split item by item.

    Commas separate when present; otherwise colons do, except inside `[...]`
    (host ranges and subscripts), as ansible-core's split_host_pattern does."""
    if not isinstance(pattern, str):
        return [part for item in pattern for part in split_host_pattern(str(item))]
    if "," in pattern:
        parts = pattern.split(",")
    elif ":" not in re.sub(r"\[[^\]]*\]", "", pattern):
        parts = [pattern]  # colons only inside [...]: one ranged or subscripted pattern
    else:
        parts = _COLON_TERMS.findall(pattern)
    return [p.strip() for p in parts if p.strip()]


def _ordered(terms: Iterable[str]) -> list[str]:
    plain = [t for t in terms if t[0] not in "&!"]
    intersect = [t for t in terms if t[0] == "&"]
    exclude = [t for t in terms if t[0] == "!"]
    return (plain or ["all"]) + intersect + exclude


def _compile(term: str) -> re.Pattern[str]:
    try:
        return re.compile(term[1:]) if term.startswith("~") else re.compile(fnmatch.translate(term))
    except re.error as exc:
        raise PatternError(f"invalid host pattern '{term}': {exc}") from None


def _enumerate(source: HostSource, term: str) -> list[str]:
    if term in ("all", "*"):
        return list(source.hosts)
    rx = _compile(term)
    groups = [g for g in source.groups if rx.match(g)]
    found: list[str] = []
    for group in groups:
        found += [h for h in source.group_hosts(group) if h not in found]
    if not groups or term[0] == "~" or any(c in term for c in ".?*["):
        found += [h for h in source.hosts if rx.match(h) and h not in found]
    return found


def _split_subscript(term: str) -> tuple[str, tuple[int, int | None] | None]:
    if term.startswith("~"):
        return term, None
    m = _SUBSCRIPT.match(term)
    if not m:
        return term, None
    expr, index, start, end = m.groups()
    if index is not None:
        return expr, (int(index), None)
    return expr, (int(start), int(end) if end else -1)


def _match_term(source: HostSource, term: str) -> list[str]:
    expr, subscript = _split_subscript(term)
    hosts = _enumerate(source, expr)
    if not hosts or subscript is None:
        return hosts
    start, end = subscript
    try:
        if end is None or end == 0:
            return [hosts[start]]  # ansible-core treats [x:0] like [x]
        last = len(hosts) - 1 if end == -1 else end
        picked = hosts[start:last + 1]
        if not picked:
            raise IndexError(start)
        return picked
    except IndexError:
        raise PatternError(f"no hosts matched the subscripted pattern '{term}'") from None


def names_nothing(source: HostSource, term: str) -> bool:
    """ansible-core's "Could not match supplied host pattern": the term, its `&`/`!` and
    subscript aside, names no group (an empty group is a group) and no host; `all` and `*`
    always name something. PatternError for a term that cannot be evaluated."""
    expr, _ = _split_subscript(term[1:] if term[0] in "&!" else term)
    if expr in ("all", "*") or expr in source.hosts:
        return False
    rx = _compile(expr)
    return not any(rx.match(name) for name in source.groups) and not any(rx.match(name) for name in source.hosts)


def select_hosts(source: HostSource, pattern: str | Sequence[str]) -> list[str]:
    """The hosts a pattern names, in inventory order of first match, without duplicates."""
    chosen: list[str] = []
    for term in _ordered(split_host_pattern(pattern)):
        if term in source.hosts:
            matched = [term]
        else:
            matched = _match_term(source, term.lstrip("&!") if term[0] in "&!" else term)
        if term[0] == "!":
            drop = set(matched)
            chosen = [h for h in chosen if h not in drop]
        elif term[0] == "&":
            keep = set(matched)
            chosen = [h for h in chosen if h in keep]
        else:
            chosen += [h for h in matched if h not in chosen]
    return chosen
