"""The agent's digests (files.py's new_hash/file_digest): CPython's builtin sha1/sha256 for the
first 4 MiB a process hashes, hashlib's after; the same hex digests either way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from opsrunner.remote import files


@pytest.fixture(autouse=True)
def fresh_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with the budget of a new agent process."""
    monkeypatch.setattr(files, "BUILTIN_HASH_BUDGET", [4 << 20])


@pytest.mark.parametrize("name", ["sha1", "sha256"])
def test_builtin_and_hashlib_digests_agree(tmp_path: Path, name: str) -> None:
    data = os.urandom(300_000)
    (tmp_path / "f").write_bytes(data)
    small = files.file_digest(str(tmp_path / "f"), name)
    assert type(files.new_hash(name, 10)).__module__ != "_hashlib"  # within the budget: a builtin
    files.BUILTIN_HASH_BUDGET[0] = 0  # spent: hashlib from now on
    assert type(files.new_hash(name, 10)).__module__ == "_hashlib"
    assert files.file_digest(str(tmp_path / "f"), name) == small == hashlib.new(name, data).hexdigest()


def test_a_large_file_goes_to_hashlib_at_once(tmp_path: Path) -> None:
    budget = files.BUILTIN_HASH_BUDGET[0]
    assert type(files.new_hash("sha256", budget + 1)).__module__ == "_hashlib"
    assert files.BUILTIN_HASH_BUDGET[0] == budget  # nothing spent on it
