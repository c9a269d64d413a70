"""Module arguments converted to the types their schema declares, as ansible-core's argument spec does.

After templating, `"30"` from `-e verify_within=30` must reach `verify` as the number 30.
A value is converted only where the conversion is lossless and unambiguous; anything else
is refused with the argument, the value and what was expected. The rules, side by side
with ansible-core 2.19's `check_type_*` (see docs/concepts.md, "Types of module arguments"):

- integer: `"30"`, `"30.0"`, `" 7 "`, `"1e3"` and `30.0` become ints; `"1.5"`, `"0x10"`,
  `"inf"` and booleans are refused (ansible-core takes `True` as 1 and fails on `"inf"`).
- number: any decimal string (`"1.5"`, `"30"`, `"1_000"`); `"nan"`, `"inf"` and booleans
  are refused (ansible-core accepts them).
- boolean: ansible's set, case-insensitive and stripped: y yes on 1 true t / n no off 0
  false f, and the numbers 0 and 1.
- array: a string starting with `[` is read as a YAML/JSON list (ansible-core splits it on
  commas into `['[1', ' 2]']`); another string is split on commas, a number becomes a
  one-item list, as in ansible-core; items are converted to the item type.
- object: a string starting with `{` is read as a YAML/JSON mapping; `k=v k2=v2` (or comma
  separated) becomes a mapping of strings, as in ansible-core.
- string: numbers become their decimal text; booleans and null are refused (ansible-core
  turns `True` into `'True'`).
"""

from __future__ import annotations

import decimal
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

BOOL_TRUE = frozenset({"y", "yes", "on", "1", "true", "t"})
BOOL_FALSE = frozenset({"n", "no", "off", "0", "false", "f"})
#: The boolean words a message suggests (y/n and t/f are accepted too, as by ansible-core).
BOOL_WORDS = "true/false, yes/no, on/off or 1/0"
_ARTICLE = {"integer": "an integer", "number": "a number", "boolean": "a boolean",
            "array": "a list", "object": "a mapping", "string": "a string", "null": "null"}


def show_value(value: Any) -> str:
    """How a value appears in an error message: the one place values are rendered into messages."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class Refusal:
    """A value that cannot be converted to the type its argument declares."""

    arg: str  # the argument's key path inside the module's arguments, e.g. "gpus[1]"
    value: Any
    wanted: str  # e.g. "a number", "an integer or a string"
    hint: str = ""

    def message(self, module: str) -> str:
        hint = f" ({self.hint})" if self.hint else ""
        return f"{module} argument '{self.arg}': {show_value(self.value)} is not {self.wanted}{hint}"


class _Refused(Exception):
    def __init__(self, hint: str = "") -> None:
        self.hint = hint
        super().__init__(hint)


def _matches(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"boolean": bool, "array": list, "object": dict, "string": str,
                              "null": type(None)}.get(kind, object))


def _to_integer(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            number = decimal.Decimal(value)
            if number.is_finite() and number == int(number):
                return int(number)
        except decimal.DecimalException:
            pass
        if _is_float_text(value):
            raise _Refused("it has a fractional part")
    raise _Refused()


def _is_float_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _to_number(value: Any) -> int | float:
    if isinstance(value, str):
        try:
            return _to_integer(value)
        except _Refused:
            pass
        try:
            number = float(value)
        except ValueError:
            raise _Refused() from None
        if math.isfinite(number):
            return number
        raise _Refused("not a finite number")
    raise _Refused()


def strict_boolean(value: Any) -> bool:
    """ansible-core's `boolean(value, strict=True)`: a bool, the number 0 or 1, or one of its
    words (any case, stripped); ValueError for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in BOOL_TRUE or text in BOOL_FALSE:
            return text in BOOL_TRUE
    elif isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{show_value(value)} is not a valid boolean (use {BOOL_WORDS}; case does not matter)")


def _to_boolean(value: Any) -> bool:
    try:
        return strict_boolean(value)
    except ValueError:
        raise _Refused(f"use {BOOL_WORDS}") from None


def _parse_yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise _Refused("it looks like YAML/JSON but does not parse") from None


def _to_array(value: Any) -> list[Any]:
    if isinstance(value, str):
        if value.lstrip().startswith("["):
            parsed = _parse_yaml(value)
            if isinstance(parsed, list):
                return parsed
            raise _Refused()
        return value.split(",")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    raise _Refused()


def _to_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, str):
        raise _Refused()
    if value.lstrip().startswith("{"):
        parsed = _parse_yaml(value)
        if isinstance(parsed, dict):
            return parsed
        raise _Refused()
    lexer = shlex.shlex(value, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    pairs = [w.partition("=") for w in words]
    if not pairs or not all(sep and key for key, sep, _ in pairs):
        raise _Refused("expected a mapping or key=value pairs")
    return {key: val for key, _, val in pairs}


def _to_string(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _Refused()


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "integer": _to_integer, "number": _to_number, "boolean": _to_boolean,
    "array": _to_array, "object": _to_object, "string": _to_string,
}


def declared_types(schema: Mapping[str, Any]) -> list[str]:
    """The JSON types a (sub)schema accepts; [] when it does not say (no conversion then)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [str(k) for k in kind]
    out: list[str] = []
    for branch in (*schema.get("anyOf", ()), *schema.get("oneOf", ())):
        out += [k for k in declared_types(branch) if k not in out]
    return out


def coerce_value(value: Any, schema: Mapping[str, Any], path: str, refusals: list[Refusal]) -> Any:
    """`value` converted to `schema`'s type (recursively); a refusal is recorded, the value kept."""
    kinds = declared_types(schema)
    if kinds and not any(_matches(value, k) for k in kinds):
        hint = ""
        for kind in kinds:
            try:
                value = _CONVERT[kind](value) if kind in _CONVERT else _refuse()
                break
            except _Refused as exc:
                hint = hint or exc.hint
        else:
            refusals.append(Refusal(path, value, " or ".join(_ARTICLE.get(k, k) for k in kinds), hint))
            return value
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [coerce_value(v, schema["items"], f"{path}[{i}]", refusals) for i, v in enumerate(value)]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {k: coerce_value(v, props[k], f"{path}.{k}", refusals) if k in props
                else coerce_value(v, extra, f"{path}.{k}", refusals) if isinstance(extra, Mapping) else v
                for k, v in value.items()}
    return value


def _refuse() -> Any:
    raise _Refused()


def coerce_args(args: Mapping[str, Any], schema: Mapping[str, Any],
                skip: Callable[[Any], bool] | None = None) -> tuple[dict[str, Any], list[Refusal]]:
    """A module's arguments converted to their declared types, and what could not be.

    `skip` leaves some values alone (the playbook loader skips templates: they are
    converted after rendering)."""
    refusals: list[Refusal] = []
    props = schema.get("properties", {})
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key not in props or (skip is not None and skip(value)):
            out[key] = value
        else:
            out[key] = coerce_value(value, props[key], key, refusals)
    return out, refusals
