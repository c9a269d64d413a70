"""The shipped restart (restart_training.yml and its role) as a schedule's project on this
machine, under a test's root, and the jobs it stops and launches: `sleep`s of unique lengths,
found and stopped by pid (for the tests of what an alert says a run changed on its hosts)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, wait_for, write_inventory, write_yaml
from tests.helpers import ProjectEnv


def alive(pid: int, marker: str) -> bool:
    """Whether `pid` is still the test's own job (its command line carries `marker`), not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return stat != "Z" and marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False


def stop(pid: int | None, marker: str) -> None:
    if pid is not None and alive(pid, marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid, marker), 5)


def pidfile_pid(env: ProjectEnv) -> int | None:
    """The pid the restart's pidfile names now, if any."""
    with contextlib.suppress(OSError, ValueError):
        return int((env.root / "demo" / "train.pid").read_text())
    return None


def restart_project(env: ProjectEnv, old_marker: str, train_command: str, **more: Any) -> None:
    """The shipped restart_training.yml and its role with one local host `box` (inv.yml),
    killing jobs matching `old_marker` and launching `train_command`; `more` overrides the
    role's vars (a job that writes no log is never verified: its verify polls until the run
    is stopped)."""
    (env.project / "roles").symlink_to(ROOT / "roles")
    shutil.copy(ROOT / "playbooks" / "restart_training.yml", env.project)
    demo = env.root / "demo"
    write_yaml(demo / "src" / "train.py", "print('hi')\n")
    write_yaml(demo / "cache" / "kernel.bin", "compiled\n")
    write_inventory(env.project / "inv.yml", {"box": {"connection": "local"}}, groups={"trainers": ["box"]},
                    all_vars={"code_src": str(demo / "src"), "code_dest": str(demo / "code"),
                              "cache_paths": [str(demo / "cache")], "pidfile": str(demo / "train.pid"),
                              "log_path": str(demo / "train.log"), "kill_pattern": old_marker.replace(".", r"\."),
                              "kill_grace": 2, "wait_gpu_free": 0, "train_command": train_command,
                              "log_grows_within": 0, "verify_within": 60, "verify_stable_for": 10, **more})
