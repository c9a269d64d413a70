"""The agent's digests (files.py's new_hash/file_digest): CPython's builtin sha1/sha256 for the
first 4 MiB a process hashes, hashlib's after; the same hex digests either way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from opsrunner.modules.base import agent_source


def _agent() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(agent_source(), "opsrunner-agent", "exec"), namespace)  # a fresh budget each time
    return namespace


@pytest.mark.parametrize("name", ["sha1", "sha256"])
def test_builtin_and_hashlib_digests_agree(tmp_path: Path, name: str) -> None:
    agent = _agent()
    data = os.urandom(300_000)
    (tmp_path / "f").write_bytes(data)
    small = agent["file_digest"](str(tmp_path / "f"), name)
    assert type(agent["new_hash"](name, 10)).__module__ != "_hashlib"  # within the budget: a builtin
    agent["BUILTIN_HASH_BUDGET"][0] = 0  # spent: hashlib from now on
    assert type(agent["new_hash"](name, 10)).__module__ == "_hashlib"
    assert agent["file_digest"](str(tmp_path / "f"), name) == small == hashlib.new(name, data).hexdigest()


def test_a_large_file_goes_to_hashlib_at_once(tmp_path: Path) -> None:
    agent = _agent()
    budget = agent["BUILTIN_HASH_BUDGET"][0]
    assert type(agent["new_hash"]("sha256", budget + 1)).__module__ == "_hashlib"
    assert agent["BUILTIN_HASH_BUDGET"][0] == budget  # nothing spent on it
