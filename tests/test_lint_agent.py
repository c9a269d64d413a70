"""The agent's package (opsrunner/remote) is checked as strictly as the controller, for the
oldest Python a target may have: mypy --strict for Python 3.8 (mypy < 1.17 still checks for
it; pyproject.toml pins it), ruff with the same rules and no per-file exceptions."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_mypy_strict_for_python_3_8() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file=", "--python-version", "3.8", "--strict",
                           "--warn-unreachable", "--no-incremental", "-p", "opsrunner.remote"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_ruff_exception_for_the_agent() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "opsrunner/remote" not in pyproject.split("[tool.ruff.lint.per-file-ignores]", 1)[1].split("\n[", 1)[0]
