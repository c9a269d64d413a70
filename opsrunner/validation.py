"""Schema checks that report every problem with file:line:col and the key path at fault."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from opsrunner.errors import Problem, SourcePos
from opsrunner.packagedata import package_text
from opsrunner.schemafast import conforms
from opsrunner.secrets import mask_assigned, shown_key
from opsrunner.yamlsource import pos_of

if TYPE_CHECKING:
    import jsonschema


@lru_cache(maxsize=64)
def load_schema(name: str) -> dict[str, Any]:
    """Load a shipped JSON Schema by relative name, e.g. 'playbook' or 'modules/shell'."""
    text = package_text(f"schema/{name}.json")
    schema: dict[str, Any] = json.loads(text)
    return schema


def key_path_str(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{shown_key(part)}" if out else shown_key(part))
    return out


def locate(root: Any, path: Sequence[Any], fallback: SourcePos) -> SourcePos:
    """Walk `path` into `root`, returning the deepest known source position."""
    node = root
    pos = getattr(root, "pos", fallback)
    for part in path:
        pos = pos_of(node, part, pos)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
    return pos


#: A JSON Schema type as a YAML writer knows it.
_KINDS = {"array": "a list", "object": "a mapping", "string": "a string", "integer": "an integer",
          "number": "a number", "boolean": "true or false", "null": "nothing"}


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    for kind, types in (("a mapping", dict), ("a list", list), ("a string", str), ("a number", int | float)):
        if isinstance(value, types):
            return kind
    return "nothing" if value is None else type(value).__name__


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator == "type":  # "expected a mapping, got a list: [1]", not Python's words
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        shown = mask_assigned(repr(error.instance))  # `environment: [HF_TOKEN=tok]`: no token shown
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return f"expected {' or '.join(_KINDS.get(str(w), str(w)) for w in wanted)}, " \
               f"got {_kind_of(error.instance)}: {shown}"
    if error.validator in ("oneOf", "anyOf"):
        options = [_describe(s) for s in error.validator_value]  # type: ignore[union-attr]
        if all(options):
            return f"{mask_assigned(repr(error.instance))} is not valid here: expected {' or '.join(options)}"
    return error.message


def _describe(schema: dict[str, Any]) -> str:
    """A short human description of a (sub)schema, for 'expected ...' messages."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return "a {{ template }}" if name == "template" else name.replace("_", " ")
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "required" in schema and "type" not in schema:
        return "with " + ", ".join(repr(r) for r in schema["required"])
    kind = schema.get("type")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind or "value")
    if schema.get("pattern") == "\\{\\{":
        return "a {{ template }}"
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    if "minimum" in schema:
        text += f" >= {schema['minimum']}"
    if "exclusiveMinimum" in schema:
        text += f" > {schema['exclusiveMinimum']}"
    if "maximum" in schema:
        text += f" <= {schema['maximum']}"
    return text


_VALIDATORS: dict[int, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """One validator per schema object: module arguments are checked per host per task."""
    import jsonschema  # ~0.1 s: only for documents the fast check does not pass

    found = _VALIDATORS.get(id(schema))
    if found is None or found.schema is not schema:  # `is`: an id can be reused once freed
        found = _VALIDATORS[id(schema)] = jsonschema.Draft202012Validator(schema)
    return found


def schema_problems(
    data: Any,
    schema: dict[str, Any],
    filename: str,
    base_path: Sequence[Any] = (),
    root: Any = None,
    fallback: SourcePos | None = None,
) -> list[Problem]:
    """Validate `data` against `schema`; each error becomes a positioned Problem. `fallback`:
    the position for errors that `root` cannot place (a scalar carries none of its own)."""
    if conforms(data, schema):  # the common case, without jsonschema (schemafast.py)
        return []
    validator = _validator(schema)
    problems = []
    root = data if root is None else root
    fallback = fallback or SourcePos(filename)
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        full = [*base_path, *error.absolute_path]
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = list(error.schema.get("properties", {}))
            for key in error.instance:
                if key not in allowed:
                    pos = locate(root, [*full, key], fallback)
                    msg = f"unknown key '{shown_key(key)}'{suggest(key, allowed)}"
                    problems.append(Problem(pos, msg, key_path_str([*full, key])))
            continue
        pos = locate(root, full, fallback)
        problems.append(Problem(pos, _message(error), key_path_str(full)))
    return problems


def suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
