"""Ansible's Jinja filters that restart procedures reach for, with ansible-core 2.19's results.

Each was compared side by side with ansible-core 2.19 (docs/ansible.md). The one
deliberate difference is `quote` on a list: each item is quoted and the words joined, so a
list becomes shell words (ansible-core quotes the list's Python repr).
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jinja2
import yaml


class FilterFailed(jinja2.TemplateRuntimeError):
    """A filter or test refused its input; the message says which and why."""


_TRUE = frozenset({"yes", "on", "true", "1"})
_FALSE = frozenset({"no", "off", "false", "0"})


def to_bool(value: Any) -> bool:
    """ansible-core's `bool`: yes/on/true/1 (any case) are true; anything else unknown is false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    check: Any = value.lower() if isinstance(value, str) else str(value).lower() if isinstance(value, int) else value
    if check in _TRUE:
        return True
    if check in _FALSE:
        return False
    return bool(check == 1)


def quote(value: Any) -> str:
    if value is None:
        return "''"
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(str(v)) for v in value)
    return shlex.quote(str(value))


def _flags(ignorecase: bool, multiline: bool) -> int:
    return (re.IGNORECASE if ignorecase else 0) | (re.MULTILINE if multiline else 0)


def regex_replace(value: Any = "", pattern: str = "", replacement: str = "", ignorecase: bool = False,
                  multiline: bool = False, count: int = 0, mandatory_count: int = 0) -> str:
    compiled = re.compile(pattern, _flags(ignorecase, multiline))
    output, subs = compiled.subn(replacement, str(value), count=count)
    if mandatory_count and mandatory_count != subs:
        raise FilterFailed(f"regex_replace: '{pattern}' should match {mandatory_count} times, "
                           f"but matches {subs} times")
    return output


def regex_search(value: Any, pattern: str, *groups: str, ignorecase: bool = False,
                 multiline: bool = False) -> Any:
    """The whole match, or a list of the groups named as '\\1' / '\\g<name>'; None without a match."""
    wanted: list[int | str] = []
    for arg in groups:
        named = re.fullmatch(r"\\g<(\S+)>", arg)
        numbered = re.fullmatch(r"\\(\d+)", arg)
        if named:
            wanted.append(named.group(1))
        elif numbered:
            wanted.append(int(numbered.group(1)))
        else:
            raise FilterFailed(f"regex_search: unknown argument {arg!r} (use '\\\\1' or '\\\\g<name>')")
    match = re.search(pattern, str(value), _flags(ignorecase, multiline))
    if match is None:
        return None
    return [match.group(g) for g in wanted] if wanted else match.group()


def ternary(value: Any, true_val: Any, false_val: Any, none_val: Any = None) -> Any:
    if value is None and none_val is not None:
        return none_val
    return true_val if value else false_val


def to_json(value: Any, *args: Any, **kwargs: Any) -> str:
    return json.dumps(value, *args, **kwargs)


def to_nice_json(value: Any, indent: int = 4, sort_keys: bool = True) -> str:
    return json.dumps(value, indent=indent, sort_keys=sort_keys, separators=(",", ": "))


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def to_yaml(value: Any, default_flow_style: bool | None = None, **kwargs: Any) -> str:
    return str(yaml.safe_dump(value, allow_unicode=True, default_flow_style=default_flow_style, **kwargs))


def to_nice_yaml(value: Any, indent: int = 4, sort_keys: bool = True, **kwargs: Any) -> str:
    """Block style, `indent` wide, keys sorted: ansible-core's to_nice_yaml."""
    return str(yaml.safe_dump(value, indent=indent, allow_unicode=True, default_flow_style=False,
                              sort_keys=sort_keys, **kwargs))


def from_yaml(value: Any) -> Any:
    return yaml.safe_load(value) if isinstance(value, str) else value


def _merge(a: dict[str, Any], b: Mapping[str, Any], recursive: bool, list_merge: str) -> dict[str, Any]:
    out = dict(a)
    for key, new in b.items():
        old = out.get(key)
        if recursive and isinstance(old, Mapping) and isinstance(new, Mapping):
            out[key] = _merge(dict(old), new, recursive, list_merge)
        elif isinstance(old, list) and isinstance(new, list) and key in out:
            out[key] = {"replace": new, "keep": old, "append": old + new, "prepend": new + old,
                        "append_rp": [x for x in old if x not in new] + new,
                        "prepend_rp": new + [x for x in old if x not in new]}[list_merge]
        else:
            out[key] = new
    return out


def combine(*terms: Any, recursive: bool = False, list_merge: str = "replace") -> dict[str, Any]:
    if list_merge not in ("replace", "keep", "append", "prepend", "append_rp", "prepend_rp"):
        raise FilterFailed(f"combine: list_merge must be one of replace, keep, append, prepend, "
                           f"append_rp, prepend_rp; got {list_merge!r}")
    dicts: list[Any] = []
    for term in terms:
        dicts.extend(term if isinstance(term, list) else [term])
    out: dict[str, Any] = {}
    for d in dicts:
        if not isinstance(d, Mapping):
            raise FilterFailed(f"combine: expects dictionaries, got {type(d).__name__}")
        out = _merge(out, d, recursive, list_merge)
    return out


def dict2items(value: Any, key_name: str = "key", value_name: str = "value") -> list[dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise FilterFailed(f"dict2items requires a dictionary, got {type(value).__name__} instead.")
    return [{key_name: k, value_name: v} for k, v in value.items()]


def items2dict(value: Any, key_name: str = "key", value_name: str = "value") -> dict[Any, Any]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise FilterFailed(f"items2dict requires a list, got {type(value).__name__} instead.")
    out: dict[Any, Any] = {}
    for item in value:
        if not isinstance(item, Mapping) or key_name not in item or value_name not in item:
            raise FilterFailed(f"items2dict: each item must be a mapping with '{key_name}' and "
                               f"'{value_name}', got {item!r}")
        out[item[key_name]] = item[value_name]
    return out


def b64encode(value: Any, encoding: str = "utf-8") -> str:
    return base64.b64encode(str(value).encode(encoding)).decode("ascii")


def b64decode(value: Any, encoding: str = "utf-8") -> str:
    return base64.b64decode(str(value)).decode(encoding)


def mandatory(value: Any, msg: str | None = None) -> Any:
    if isinstance(value, jinja2.Undefined):
        if msg is not None:
            raise FilterFailed(msg)
        name = getattr(value, "_undefined_name", None)
        raise FilterFailed(f"Mandatory variable {repr(name) + ' ' if name else ''}not defined.")
    return value


def flatten(value: Any, levels: int | None = None, skip_nulls: bool = True) -> list[Any]:
    out: list[Any] = []
    for element in value:
        if skip_nulls and element in (None, "None", "null"):
            continue
        if isinstance(element, (list, tuple)):
            if levels is None:
                out.extend(flatten(element, skip_nulls=skip_nulls))
            elif levels >= 1:
                out.extend(flatten(element, levels=int(levels) - 1, skip_nulls=skip_nulls))
            else:
                out.append(element)
        else:
            out.append(element)
    return out


def basename(value: Any) -> str:
    return posixpath.basename(str(value))


def dirname(value: Any) -> str:
    return posixpath.dirname(str(value))


FILTERS: dict[str, Callable[..., Any]] = {
    "bool": to_bool, "quote": quote, "regex_replace": regex_replace, "regex_search": regex_search,
    "ternary": ternary, "to_json": to_json, "to_nice_json": to_nice_json, "from_json": from_json,
    "to_yaml": to_yaml, "to_nice_yaml": to_nice_yaml, "from_yaml": from_yaml, "combine": combine,
    "dict2items": dict2items,
    "items2dict": items2dict, "b64encode": b64encode, "b64decode": b64decode, "mandatory": mandatory,
    "flatten": flatten, "basename": basename, "dirname": dirname,
}
