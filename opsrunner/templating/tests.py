"""Ansible's Jinja tests: task result tests, regex tests and `version` (ansible-core 2.19)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import pass_context
from jinja2.runtime import Context

from opsrunner.tagrules import tags_selected
from opsrunner.templating.filters import FilterFailed


def _result(value: Any, test: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FilterFailed(f"The '{test}' test expects a dictionary")
    return value


def failed(value: Any) -> bool:
    return bool(_result(value, "failed").get("failed", False))


def succeeded(value: Any) -> bool:
    return not bool(_result(value, "succeeded").get("failed", False))


def changed(value: Any) -> bool:
    result = _result(value, "changed")
    if "changed" in result:
        return bool(result["changed"])
    items = result.get("results")
    # A looped task's result: changed when any item changed (as ansible-core reads it).
    return isinstance(items, list) and any(isinstance(i, Mapping) and i.get("changed") for i in items)


def skipped(value: Any) -> bool:
    return bool(_result(value, "skipped").get("skipped", False))


def _regex(value: Any, pattern: str, ignorecase: bool, multiline: bool, how: str) -> bool:
    flags = (re.IGNORECASE if ignorecase else 0) | (re.MULTILINE if multiline else 0)
    func = {"match": re.match, "search": re.search, "fullmatch": re.fullmatch}[how]
    return func(pattern, str(value), flags) is not None


def match(value: Any, pattern: str = "", ignorecase: bool = False, multiline: bool = False) -> bool:
    return _regex(value, pattern, ignorecase, multiline, "match")


def search(value: Any, pattern: str = "", ignorecase: bool = False, multiline: bool = False) -> bool:
    return _regex(value, pattern, ignorecase, multiline, "search")


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "=": operator.eq, "eq": operator.eq, "<": operator.lt, "lt": operator.lt,
    "<=": operator.le, "le": operator.le, ">": operator.gt, "gt": operator.gt, ">=": operator.ge,
    "ge": operator.ge, "!=": operator.ne, "<>": operator.ne, "ne": operator.ne,
}
_STRICT = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:([ab])(\d+))?$")


def _loose(text: str) -> list[Any]:
    """distutils' LooseVersion: runs of digits compare as numbers, letters as text."""
    parts: list[Any] = []
    for part in re.split(r"(\d+|[a-z]+|\.)", text):
        if part and part != ".":
            parts.append(int(part) if part.isdigit() else part)
    return parts


def _strict(text: str) -> tuple[Any, ...]:
    found = _STRICT.match(text)
    if found is None:
        raise FilterFailed(f"Version comparison failed: invalid version number '{text}'")
    major, minor, patch, pre, pre_n = found.groups()
    release = (int(major), int(minor), int(patch or 0))
    # A pre-release sorts before its release, as StrictVersion does.
    return release + ((pre, int(pre_n)) if pre else ("z", 0))


def version(value: Any, version: Any, operator: str = "eq", strict: bool = False,
            version_type: str | None = None) -> bool:
    op = _OPS.get(operator)
    if op is None:
        raise FilterFailed(f"Invalid operator type ({operator})")
    kind = version_type or ("strict" if strict else "loose")
    if kind not in ("loose", "strict"):
        raise FilterFailed(f"version_type {kind!r} is not supported (opsrunner supports loose and strict)")
    parse: Callable[[str], Any] = _strict if kind == "strict" else _loose
    try:
        return op(parse(str(value)), parse(str(version)))
    except TypeError as exc:
        raise FilterFailed(f"Version comparison failed: {exc}") from None


@pass_context
def selected_tag(context: Context, value: Any) -> bool:
    """Whether a task tagged `value` (a tag, or a list of them) runs under this run's --tags and
    --skip-tags: decided by the selection itself, not re-implemented in a template."""
    tags = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
    run, skip = context.get("ansible_run_tags") or (), context.get("ansible_skip_tags") or ()
    return tags_selected(frozenset(map(str, tags)), frozenset(run), frozenset(skip))


TESTS: dict[str, Callable[..., bool]] = {
    "selected_tag": selected_tag,
    "failed": failed, "failure": failed, "succeeded": succeeded, "success": succeeded,
    "successful": succeeded, "changed": changed, "change": changed, "skipped": skipped,
    "skip": skipped, "match": match, "search": search, "version": version,
    "version_compare": version,
}
