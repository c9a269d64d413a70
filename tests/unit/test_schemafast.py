"""schemafast.conforms agrees with jsonschema (Draft 2020-12) on every shipped schema.

Documents are generated from each schema (valid ones, then mutated at random: wrong types,
unknown keys, values out of range, missing keys), with a fixed seed, plus the shipped
playbooks, roles and inventories. For each, conforms() must say exactly what jsonschema
says: these schemas use only keywords the fast check implements, so it never defers."""

from __future__ import annotations

import copy
import json
import random
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from opsrunner.schemafast import conforms
from opsrunner.validation import load_schema

ROOT = Path(__file__).resolve().parents[2]
MODULE_SCHEMAS = sorted(f"modules/{p.name[:-5]}" for p in resources.files("opsrunner").joinpath("schema", "modules")
                        .iterdir() if p.name.endswith(".json"))
SCHEMAS = ["playbook", "inventory", *MODULE_SCHEMAS]
STRINGS = ["", "a", "x1", "{{ x }}", "/tmp/a b", "1", "yes", "50%", "sleep 1", "~/job.pid", "TERM", "present"]
NUMBERS = [-1, 0, 1, 2, 5, 300, 0.5, 1.0, -0.25, 65536]


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]] | {k: v for k, v in schema.items() if k != "$ref"}
    return schema


def _scalar(rng: random.Random) -> Any:
    return rng.choice([None, True, False, rng.choice(STRINGS), rng.choice(NUMBERS), [], {}])


def generate(schema: Any, root: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A document the schema should mostly accept."""
    if not isinstance(schema, dict) or depth > 6:
        return _scalar(rng)
    schema = _resolve(schema, root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return generate(_resolve(rng.choice(schema[key]), root) | {k: v for k, v in schema.items() if k != key},
                            root, rng, depth + 1)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kinds = schema.get("type", rng.choice(["string", "object", "integer"]))
    kind = rng.choice(kinds) if isinstance(kinds, list) else kinds
    if kind == "object":
        props = schema.get("properties", {})
        keys = set(schema.get("required", [])) | {k for k in props if rng.random() < 0.4}
        out = {k: generate(props.get(k, {}), root, rng, depth + 1) for k in sorted(keys)}
        extra = schema.get("additionalProperties", True)
        if isinstance(extra, dict) and rng.random() < 0.5:
            out[rng.choice(STRINGS) or "k"] = generate(extra, root, rng, depth + 1)
        return out
    if kind == "array":
        return [generate(schema.get("items", {}), root, rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "string":
        return rng.choice(STRINGS)
    if kind in ("integer", "number"):
        value = rng.choice([n for n in NUMBERS if kind == "number" or float(n).is_integer()])
        return int(value) if kind == "integer" and rng.random() < 0.8 else value
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def mutate(doc: Any, rng: random.Random) -> Any:
    """The document with one node replaced, removed or added to."""
    doc = copy.deepcopy(doc)
    if not isinstance(doc, (dict, list)) or not doc or rng.random() < 0.2:
        return _scalar(rng)
    parent, key = doc, rng.choice(list(doc) if isinstance(doc, dict) else range(len(doc)))
    while isinstance(parent[key], (dict, list)) and parent[key] and rng.random() < 0.6:
        parent = parent[key]
        key = rng.choice(list(parent) if isinstance(parent, dict) else range(len(parent)))
    action = rng.random()
    if action < 0.5:
        parent[key] = _scalar(rng)
    elif action < 0.75 and isinstance(parent, dict):
        del parent[key]
    elif isinstance(parent, dict):
        parent[rng.choice(STRINGS) or "unknown"] = _scalar(rng)
    else:
        parent.append(_scalar(rng))
    return doc


def _agree(doc: Any, schema: dict[str, Any], validator: Any) -> bool:
    valid = not any(True for _ in validator.iter_errors(doc))
    assert conforms(doc, schema) is valid, (json.dumps(doc, default=str)[:500], valid)
    return valid


@pytest.mark.parametrize("name", SCHEMAS)
def test_agrees_with_jsonschema_on_generated_documents(name: str) -> None:
    schema = load_schema(name)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"schemafast-{name}")
    outcomes = []
    for _ in range(150):
        doc = generate(schema, schema, rng)
        outcomes.append(_agree(doc, schema, validator))
        outcomes.append(_agree(mutate(doc, rng), schema, validator))
    # Both answers were exercised: the comparison means something for this schema.
    assert any(outcomes) and not all(outcomes), (name, sum(outcomes), len(outcomes))


def test_agrees_on_the_shipped_playbooks_roles_and_inventories() -> None:
    schema = load_schema("playbook")
    validator = jsonschema.Draft202012Validator(schema)
    task_list = schema["$defs"]["task_list"] | {"$defs": schema["$defs"]}
    tasks_validator = jsonschema.Draft202012Validator(task_list)
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        assert _agree(yaml.safe_load(path.read_text()), schema, validator), path
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        assert _agree(yaml.safe_load(path.read_text()), task_list, tasks_validator), path
    inventory = load_schema("inventory")
    inventory_validator = jsonschema.Draft202012Validator(inventory)
    for path in sorted((ROOT / "inventory").rglob("*.yml")):
        assert _agree(yaml.safe_load(path.read_text()), inventory, inventory_validator), path


@pytest.mark.parametrize(("data", "schema"), [
    ({"a": 1}, {"patternProperties": {"^a$": {"type": "string"}}}),  # a keyword it does not implement
    ({"a": 1}, {"properties": {"a": {"$ref": "https://example.invalid/s"}}}),  # a remote reference
    ([1, 2], {"enum": [[1, 2]]}),  # an enum of containers
])
def test_defers_to_jsonschema_on_what_it_does_not_implement(data: Any, schema: dict[str, Any]) -> None:
    assert conforms(data, schema) is False


@pytest.mark.parametrize(("data", "schema", "valid"), [
    (True, {"type": "integer"}, False),  # booleans are not numbers
    (1.0, {"type": "integer"}, True),  # an integral float is an integer in 2020-12
    (True, {"enum": [1]}, False),
    (1, {"enum": [1.0]}, True),
    (5, {"exclusiveMinimum": 5}, False),
    ("abc", {"pattern": "b"}, True),  # search, not match
    ({"x": 1}, {"if": {"required": ["x"]}, "then": {"properties": {"x": {"type": "string"}}}}, False),
    ({"y": 1}, {"if": {"required": ["x"]}, "then": False}, True),
])
def test_edge_cases_as_jsonschema_has_them(data: Any, schema: dict[str, Any], valid: bool) -> None:
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(data))
    assert (not errors) is valid
    assert conforms(data, schema) is valid
