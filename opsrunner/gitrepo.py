"""Asking git about the checkout a file is in (the run history's commit, a release's name)."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 10


def run_git(path: Path, *argv: str) -> subprocess.CompletedProcess[str] | None:
    """`git -C FOLDER ARGV` for the folder holding `path`; None where git is missing or hangs."""
    folder = path if path.is_dir() else path.parent
    try:
        return subprocess.run(["git", "-C", str(folder), *argv], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
