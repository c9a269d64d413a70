"""Running the CLI in-process and as a subprocess, for tests."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsrunner.cli import main

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    def events(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()]


def cli(*args: str, cwd: Path | None = None) -> CliResult:
    """Run the CLI in this process (fast); cwd is switched for the call."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    if cwd:
        os.chdir(cwd)
    try:
        rc = main(list(args), out, err)
    finally:
        os.chdir(old)
    return CliResult(rc, out.getvalue(), err.getvalue())


def cli_subprocess(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 120) -> CliResult:
    """Run `python -m opsrunner` as a separate process, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "opsrunner", *args], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def task_ends(events: list[dict[str, Any]], task: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] in ("task_end", "handler_end") and (task is None or e["task"] == task)]
