"""write_atomic makes the file durable: its data is synced before the rename, and the
directory after it (the last good run must survive a power cut)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_data_is_synced_before_the_rename_and_the_directory_after(tmp_path: Path) -> None:
    target = tmp_path / "train.good.json"
    code = f"from opsrunner.remote.atomic import write_atomic; write_atomic({str(target)!r}, b'{{}}', 0o600)"
    traced = subprocess.run(["strace", "-f", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", sys.executable,
                             "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert traced.returncode == 0, traced.stderr
    calls = [m.group(1) for m in re.finditer(r"^(?:\[pid +\d+\] )?(\w+)\(", traced.stderr, re.M)
             if m.group(1) in ("fsync", "fdatasync", "rename", "renameat", "renameat2")]
    assert calls[-3:] in (["fsync", "rename", "fsync"], ["fsync", "renameat", "fsync"],
                          ["fsync", "renameat2", "fsync"]), traced.stderr[-2000:]
    assert target.read_bytes() == b"{}" and oct(target.stat().st_mode & 0o777) == "0o600"
