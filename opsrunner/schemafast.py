"""A fast yes-or-don't-know check of data against the JSON Schema subset opsrunner's schemas use.

Every run validates its playbook, inventory and, per host and task, the rendered module
arguments; with jsonschema that is ~0.1 s to import it and ~0.7 ms a validation (0.7 s of the
controller's one core at 200 hosts x 5 tasks). `conforms` answers True only when the data is
valid under Draft 2020-12 for every keyword it meets; on anything it does not implement, and
on every invalid document, it answers False, and validation.py asks jsonschema, which stays
the authority and writes the messages. tests/unit/test_schemafast.py checks the two agree on
generated documents for every shipped schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

#: Keywords that never make a document invalid.
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples",
                          "x-opsrunner", "deprecated", "readOnly", "writeOnly"})


class _Unsupported(Exception):
    """A keyword or a form of one that this check does not implement: ask jsonschema."""


def conforms(data: Any, schema: dict[str, Any]) -> bool:
    """True when `data` is certainly valid against `schema` (Draft 2020-12); False when it is
    invalid or when this check cannot tell."""
    try:
        return _valid(data, schema, schema)
    except _Unsupported:
        return False


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float))
    raise _Unsupported(name)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema's enum applies it: booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        raise _Unsupported("enum of containers")
    return bool(a == b) and _number(a) == _number(b)


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/$defs/") or "/" in ref[len("#/$defs/"):]:
        raise _Unsupported(ref)
    found = root.get("$defs", {}).get(ref[len("#/$defs/"):])
    if not isinstance(found, dict):
        raise _Unsupported(ref)
    return found


def _valid(data: Any, schema: Any, root: dict[str, Any]) -> bool:
    if schema is True:
        return True
    if schema is False:
        return False
    if not isinstance(schema, dict):
        raise _Unsupported(repr(schema))
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        check = _KEYWORDS.get(key)
        if check is None:
            raise _Unsupported(key)
        if not check(data, value, schema, root):
            return False
    return True


def _type(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
    names = value if isinstance(value, list) else [value]
    return any(_is_type(data, name) for name in names)


def _properties(data: Any, value: Any, _schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(data, dict):
        return True
    return all(_valid(data[key], sub, root) for key, sub in value.items() if key in data)


def _additional(data: Any, value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if not isinstance(data, dict):
        return True
    if "patternProperties" in schema:
        raise _Unsupported("patternProperties")
    known = schema.get("properties", {})
    extra = [key for key in data if key not in known]
    return all(_valid(data[key], value, root) for key in extra)


def _required(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
    return not isinstance(data, dict) or all(key in data for key in value)


def _items(data: Any, value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if "prefixItems" in schema:
        raise _Unsupported("prefixItems")
    return not isinstance(data, list) or all(_valid(item, value, root) for item in data)


def _ref(data: Any, value: Any, _schema: dict[str, Any], root: dict[str, Any]) -> bool:
    return _valid(data, _resolve(value, root), root)


def _any_of(data: Any, value: Any, _schema: dict[str, Any], root: dict[str, Any]) -> bool:
    # One valid branch settles it; an unsupported branch before it defers to jsonschema.
    return any(_valid(data, sub, root) for sub in value)


def _one_of(data: Any, value: Any, _schema: dict[str, Any], root: dict[str, Any]) -> bool:
    return sum(1 for sub in value if _valid(data, sub, root)) == 1


def _if(data: Any, value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    branch = schema.get("then", True) if _valid(data, value, root) else schema.get("else", True)
    return _valid(data, branch, root)


def _enum(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
    return any(_equal(data, option) for option in value)


def _const(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
    return _equal(data, value)


def _pattern_check(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
    return not isinstance(data, str) or _pattern(value).search(data) is not None


def _bound(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]:
    def check(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
        return not _number(data) or test(data, value)
    return check


def _size(kind: type[str] | type[list[Any]] | type[dict[Any, Any]],
          test: Callable[[int, Any], bool]) -> Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]:
    def check(data: Any, value: Any, _schema: dict[str, Any], _root: dict[str, Any]) -> bool:
        return not isinstance(data, kind) or test(len(data), value)
    return check


_KEYWORDS: dict[str, Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "$ref": _ref,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "if": _if,
    "then": lambda *_: True,  # applied by "if"
    "else": lambda *_: True,
    "enum": _enum,
    "const": _const,
    "pattern": _pattern_check,
    "minimum": _bound(lambda n, v: n >= v),
    "maximum": _bound(lambda n, v: n <= v),
    "exclusiveMinimum": _bound(lambda n, v: n > v),
    "exclusiveMaximum": _bound(lambda n, v: n < v),
    "minLength": _size(str, lambda n, v: n >= v),
    "maxLength": _size(str, lambda n, v: n <= v),
    "minItems": _size(list, lambda n, v: n >= v),
    "maxItems": _size(list, lambda n, v: n <= v),
    "minProperties": _size(dict, lambda n, v: n >= v),
    "maxProperties": _size(dict, lambda n, v: n <= v),
}
