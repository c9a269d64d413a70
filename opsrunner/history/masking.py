"""What history treats as secret, until opsrunner/secrets.py provides the one masking API.

Values of variables whose names look secret are replaced, and those values are also
blanked wherever they appear in task messages. This is the single place to point at
secrets.py once it exists.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "********"
SECRET_NAME_PATTERNS = ("*password*", "*passwd*", "*secret*", "*token*", "*api_key*")


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, p) for p in SECRET_NAME_PATTERNS)


def secret_values(variables: Mapping[str, Any]) -> list[str]:
    """The values to hide, nested mappings included (longest first, so substrings mask last)."""
    found: list[str] = []
    for key, value in variables.items():
        if isinstance(value, Mapping):
            found += secret_values(value)
        elif is_secret_name(str(key)) and value not in (None, ""):
            found.append(str(value))
    return sorted(set(found), key=len, reverse=True)


def mask_vars(variables: Mapping[str, Any]) -> dict[str, Any]:
    return {k: mask_vars(v) if isinstance(v, Mapping) else (MASK if is_secret_name(str(k)) else v)
            for k, v in variables.items()}


def mask_text(text: str, values: Iterable[str]) -> str:
    for value in values:
        text = text.replace(value, MASK)
    return text
