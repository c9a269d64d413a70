"""-e values: key=value pairs, YAML/JSON mappings and @files, as ansible-playbook takes them."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import GivenPos, Problem, SourcePos, ValidationError


def parse_extra_vars(values: Sequence[str]) -> dict[str, Any]:
    """The variables of every -e, later ones winning; each remembers the -e that gave it (a
    PosDict's key_pos): `-e name=value`, or its key's line in `-e @file` or `-e '{...}'`."""
    from opsrunner.yamlsource import load_yaml_file, load_yaml_text, positioned

    result = positioned()
    problems: list[Problem] = []
    for number, value in enumerate(values, 1):
        if value.startswith("@"):
            try:
                data = load_yaml_file(Path(value[1:]))
            except ValidationError as exc:
                problems += exc.problems
                continue
            origin = value[1:]
            _given_in(data, f"-e @{origin}")
        elif value.lstrip()[:1] in ("{", "["):
            try:
                data = load_yaml_text(value, "<-e>")
            except ValidationError as exc:
                problems += exc.problems
                continue
            origin = "<-e>"
        elif value[:1] in ("/", "."):
            problems.append(Problem(SourcePos("<-e>"), f"to read variables from {value}, write -e @{value}"))
            continue
        else:
            data = positioned()
            try:
                words = shlex.split(value)  # as ansible-playbook -e: k="a b" n=1 is two variables
            except ValueError as exc:
                # The value itself is not shown: it may hold a secret.
                problems.append(Problem(SourcePos("<-e>"), f"-e value {number} cannot be split "
                                        f"like a shell: {exc}"))
                continue
            for pair in words:
                key, sep, val = pair.partition("=")
                if not sep or not key.isidentifier():
                    why = f"expected key=value, got {pair!r}" if not sep else \
                        f"{key!r} is not a variable name (letters, digits and _, not starting with a digit)"
                    problems.append(Problem(SourcePos("<-e>"), why, pair if not sep else key))
                    continue
                data[key] = val
                data.key_pos[key] = GivenPos(f"-e {key}={shlex.quote(val) if val else ''}")  # as typed: -e log_path=
            origin = "<-e>"
        if data is not None and not isinstance(data, dict):
            problems.append(Problem(SourcePos(origin), "extra vars must be a mapping"))
            continue
        result = positioned(result, data)
    if problems:
        raise ValidationError(problems)
    return result


def _given_in(data: Any, origin: str) -> None:
    """Each key and item of an `-e @file`, at any depth, told as that -e: `-e @vars.yml:3:1`
    (a mapping or list an alias repeats is told once)."""
    from opsrunner.yamlsource import PosDict, PosList

    def given(pos: SourcePos) -> SourcePos:
        return pos if isinstance(pos, GivenPos) else GivenPos(origin, pos.line, pos.col)

    if isinstance(data, PosDict):
        data.pos, data.key_pos = given(data.pos), {k: given(p) for k, p in data.key_pos.items()}
        items = list(data.values())
    elif isinstance(data, PosList):
        data.pos, data.item_pos = given(data.pos), [given(p) for p in data.item_pos]
        items = list(data)
    else:
        return
    for item in items:
        if isinstance(item, PosDict | PosList) and not isinstance(item.pos, GivenPos):
            _given_in(item, origin)
