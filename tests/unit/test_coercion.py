"""Module arguments converted to their declared types: every rule and every refusal.

The `ansible` column is what ansible-core 2.19.14's ArgumentSpecValidator returned for the
same value and type (run side by side through a module with `type: raw` input); the rows
where opsrunner differs on purpose say why in `note`."""

from __future__ import annotations

from typing import Any

import pytest

from opsrunner.coercion import Refusal, coerce_args, coerce_value, show_value

JSON_TYPE = {"int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object",
             "str": "string"}

# (ansible type, value, opsrunner result or REFUSED, ansible-core result, note)
REFUSED = object()
CASES: list[tuple[str, Any, Any, Any, str]] = [
    ("int", "30", 30, 30, ""),
    ("int", "30.0", 30, 30, ""),
    ("int", " 7 ", 7, 7, ""),
    ("int", "1e3", 1000, 1000, ""),
    ("int", 2.0, 2, 2, ""),
    ("int", "1.5", REFUSED, "error", ""),
    ("int", "thirty", REFUSED, "error", ""),
    ("int", "0x10", REFUSED, "error", ""),
    ("int", "inf", REFUSED, "crash: cannot convert Infinity to integer", ""),
    ("int", True, REFUSED, True, "a boolean is not a count"),
    ("float", "1.5", 1.5, 1.5, ""),
    ("float", "30", 30, 30.0, "an integral string stays an int: same value"),
    ("float", "1_000", 1000, 1000.0, ""),
    ("float", "abc", REFUSED, "error", ""),
    ("float", "nan", REFUSED, "nan", "not a usable number of seconds/MB"),
    ("float", True, REFUSED, 1.0, "a boolean is not a quantity"),
    ("bool", "true", True, True, ""),
    ("bool", "yes", True, True, ""),
    ("bool", "on", True, True, ""),
    ("bool", "1", True, True, ""),
    ("bool", "Y", True, True, ""),
    ("bool", " True ", True, True, ""),
    ("bool", "t", True, True, ""),
    ("bool", "off", False, False, ""),
    ("bool", "No", False, False, ""),
    ("bool", 1, True, True, ""),
    ("bool", 0.0, False, False, ""),
    ("bool", 2, REFUSED, "error", ""),
    ("bool", "maybe", REFUSED, "error", ""),
    ("list", "[1, 2]", [1, 2], ["[1", " 2]"], "a YAML/JSON list string is read as a list"),
    ("list", "a,b", ["a", "b"], ["a", "b"], ""),
    ("list", "x", ["x"], ["x"], ""),
    ("list", 5, ["5"], ["5"], ""),
    ("list", {"a": 1}, REFUSED, "error", ""),
    ("list", "[1, 2", REFUSED, ["[1", " 2"], "looks like a list but does not parse"),
    ("dict", '{"a": 1}', {"a": 1}, {"a": 1}, ""),
    ("dict", "{a: 1}", {"a": 1}, "error", "YAML flow mappings too"),
    ("dict", "a=1 b=2", {"a": "1", "b": "2"}, {"a": "1", "b": "2"}, ""),
    ("dict", "a=1, b='x y'", {"a": "1", "b": "x y"}, {"a": "1", "b": "x y"}, ""),
    ("dict", "x", REFUSED, "error", ""),
    ("str", 30, "30", "30", ""),
    ("str", 1.5, "1.5", "1.5", ""),
    ("str", True, REFUSED, "True", "'True' or 'true'? ambiguous"),
    ("str", None, REFUSED, None, "null is no text"),
    ("str", [1], REFUSED, "[1]", "a list is not text"),
]


@pytest.mark.parametrize("kind,value,expected,ansible,note", CASES,
                         ids=[f"{c[0]}-{c[1]!r}" for c in CASES])
def test_conversion_rule(kind: str, value: Any, expected: Any, ansible: Any, note: str) -> None:
    refusals: list[Refusal] = []
    result = coerce_value(value, {"type": JSON_TYPE[kind]}, "x", refusals)
    if expected is REFUSED:
        assert len(refusals) == 1, result
        assert result == value  # the value is kept for the message
    else:
        assert refusals == []
        assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize("schema,value,message", [
    ({"type": "number"}, "thirty", "verify argument 'within': 'thirty' is not a number"),
    ({"type": "integer"}, "1.5", "verify argument 'within': '1.5' is not an integer (it has a fractional part)"),
    ({"type": "number"}, "inf", "verify argument 'within': 'inf' is not a number (not a finite number)"),
    ({"type": "boolean"}, "maybe",
     "verify argument 'within': 'maybe' is not a boolean (use true/false, yes/no, on/off or 1/0)"),
    ({"type": "array"}, "[1, 2", "verify argument 'within': '[1, 2' is not a list (it looks like YAML/JSON but "
                                 "does not parse)"),
    ({"type": "object"}, "x", "verify argument 'within': 'x' is not a mapping (expected a mapping or key=value "
                              "pairs)"),
    ({"type": ["string", "integer"]}, True, "verify argument 'within': True is not a string or an integer"),
])
def test_refusal_messages_name_argument_and_value(schema: dict[str, Any], value: Any, message: str) -> None:
    refusals: list[Refusal] = []
    coerce_value(value, schema, "within", refusals)
    assert [r.message("verify") for r in refusals] == [message]


def test_nested_items_and_mapping_values_are_converted() -> None:
    schema = {"properties": {
        "gpus": {"type": "array", "items": {"type": "integer"}},
        "env": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
        "grace": {"type": "number"},
    }}
    args, refusals = coerce_args({"gpus": "0,1", "env": "A=1 B=x", "grace": "5", "other": "kept"}, schema)
    assert refusals == []
    assert args == {"gpus": [0, 1], "env": {"A": "1", "B": "x"}, "grace": 5, "other": "kept"}
    args, refusals = coerce_args({"gpus": ["0", "one"]}, schema)
    assert [(r.arg, r.value) for r in refusals] == [("gpus[1]", "one")]


def test_templates_are_left_for_after_rendering() -> None:
    args, refusals = coerce_args({"grace": "{{ g }}"}, {"properties": {"grace": {"type": "number"}}},
                                 skip=lambda v: "{{" in str(v))
    assert (args, refusals) == ({"grace": "{{ g }}"}, [])


def test_values_in_messages_are_bounded() -> None:
    assert show_value("x" * 500).endswith("...") and len(show_value("x" * 500)) == 80
