"""The code stays ruff- and mypy-clean, and docs/modules.md's module reference matches the schemas."""

from __future__ import annotations

import subprocess
import sys

from opsrunner.docgen import module_reference, section
from tests.conftest import ROOT


def test_ruff_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "opsrunner", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_module_reference_matches_schemas() -> None:
    page = (ROOT / "docs" / "modules.md").read_text()
    assert section(page) == module_reference().strip("\n"), \
        "docs/modules.md's module reference is stale: run python -m opsrunner.docgen --write"
