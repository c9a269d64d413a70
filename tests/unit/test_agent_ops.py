"""The controller and the agent agree on their ops: every op the agent serves has a typed
AgentOp on the controller (connections/ops.py) with request and reply types in the shared
protocol modules (remote/protocol.py and its protocol_* families), no controller code names
an op by a bare string, and verify's arguments, passed through as the op's request, are
exactly VerifyArgs' keys."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from opsrunner.connections import ops
from opsrunner.remote.agent import OPS

PACKAGE = Path(ops.__file__).resolve().parent.parent
#: The protocol's modules: the framing and envelope, and the ops' types by family.
PROTOCOL = [ast.parse(path.read_text()) for path in sorted((PACKAGE / "remote").glob("protocol*.py"))]


def _typed_dict_keys(name: str) -> set[str]:
    """The keys of a TypedDict of the protocol's modules, its bases' included."""
    classes = {n.name: n for tree in PROTOCOL for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    node = classes[name]
    keys = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in classes:
            keys |= _typed_dict_keys(base.id)
    return keys


def _agent_ops() -> dict[str, ops.AgentOp[object, object]]:
    return {v.name: v for v in vars(ops).values() if isinstance(v, ops.AgentOp)}


def test_every_op_of_the_agent_has_a_typed_op_on_the_controller() -> None:
    assert set(_agent_ops()) == set(OPS)


def test_every_op_has_its_request_and_reply_types_in_the_protocol() -> None:
    source = (PACKAGE / "connections" / "ops.py").read_text()
    for name in OPS:
        found = re.search(rf"^{name.upper()}: AgentOp\[(\w+), (\w+)\] = AgentOp\(\"{name}\"\)$", source, re.M)
        assert found, name
        for type_name in found.groups():
            assert _typed_dict_keys(type_name) is not None


def test_no_controller_code_names_an_op_by_a_bare_string() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if "remote" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            named = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("agent", "call", "request") and node.args
            if named and isinstance(node.args[0], ast.Constant) and node.args[0].value in OPS:
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def test_verify_arguments_are_the_ops_request() -> None:
    schema = json.loads((PACKAGE / "schema" / "modules" / "verify.json").read_text())
    assert set(schema["properties"]) | {"budget"} == _typed_dict_keys("VerifyArgs")
