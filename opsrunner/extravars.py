"""-e values: key=value pairs, YAML/JSON mappings and @files, as ansible-playbook takes them."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, ValidationError


def parse_extra_vars(values: Sequence[str]) -> dict[str, Any]:
    from opsrunner.yamlsource import load_yaml_file, load_yaml_text

    result: dict[str, Any] = {}
    problems: list[Problem] = []
    for number, value in enumerate(values, 1):
        if value.startswith("@"):
            try:
                data = load_yaml_file(Path(value[1:]))
            except ValidationError as exc:
                problems += exc.problems
                continue
            origin = value[1:]
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
            data = {}
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
            origin = "<-e>"
        if data is not None and not isinstance(data, dict):
            problems.append(Problem(SourcePos(origin), "extra vars must be a mapping"))
            continue
        result.update(data or {})
    if problems:
        raise ValidationError(problems)
    return result
