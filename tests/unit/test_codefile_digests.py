"""deploy_code's local digests are kept per file for the run's other hosts, and never outlive
a change to the file: any write changes its ctime, and another file under the same name has
another inode."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from opsrunner.modules.codefiles import sha256_of


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_rewrite_of_the_same_size_and_mtime_gets_its_new_digest(tmp_path: Path) -> None:
    code = tmp_path / "train.py"
    code.write_bytes(b"lr = 0.1\n")
    _age(code, 60)
    assert sha256_of(code) == _sha(b"lr = 0.1\n")
    assert sha256_of(code) == _sha(b"lr = 0.1\n")  # kept: the second host's answer
    mtime_ns = code.stat().st_mtime_ns
    code.write_bytes(b"lr = 0.2\n")  # same size; its mtime set back to the old one below
    os.utime(code, ns=(mtime_ns, mtime_ns))
    assert code.stat().st_mtime_ns == mtime_ns
    assert sha256_of(code) == _sha(b"lr = 0.2\n")


def test_a_file_replaced_by_another_of_the_same_stat_gets_its_digest(tmp_path: Path) -> None:
    code = tmp_path / "train.py"
    code.write_bytes(b"one\n")
    _age(code, 60)
    assert sha256_of(code) == _sha(b"one\n")
    fresh = tmp_path / "new.py"
    fresh.write_bytes(b"two\n")
    _age(fresh, 60)
    os.replace(fresh, code)  # another inode under the same name (a deploy by rename)
    assert sha256_of(code) == _sha(b"two\n")
