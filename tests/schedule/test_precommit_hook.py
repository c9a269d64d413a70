"""The shipped pre-commit hook runs `opsrunner check` the way pre-commit would call it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, write_yaml


def _hook_argv(args: list[str]) -> list[str]:
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "opsrunner-check" and hook["language"] == "python" and hook["pass_filenames"] is False
    entry = hook["entry"].split()
    assert entry[0] == "opsrunner"  # the console script pre-commit installs from this package
    return [sys.executable, "-m", "opsrunner", *entry[1:], *args]


def test_hook_passes_the_shipped_playbooks() -> None:
    for playbook in ("playbooks/restart_training.yml", "playbooks/status.yml", "playbooks/stop_training.yml"):
        proc = subprocess.run(_hook_argv([playbook, "-i", "inventory/hosts.yml"]), cwd=ROOT, capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"{playbook}: OK")


def test_hook_fails_a_broken_procedure(tmp_path: Path) -> None:
    write_yaml(tmp_path / "p.yml", [{"hosts": "all", "tasks": [{"kill_old": {"pidfile": "/x", "grace": "soon"}}]}])
    proc = subprocess.run(_hook_argv(["p.yml"]), cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 4
    assert "ERROR: p.yml:5:7: kill_old argument 'grace': 'soon' is not a number (at [0].tasks[0].kill_old.grace)" \
        in proc.stderr
