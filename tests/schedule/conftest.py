"""A project with one local host and a one-task playbook, for the schedule tests that need
nothing more (a test file may define its own `env`); the old job a restart stops."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import sleep_marker, write_yaml
from tests.helpers import ProjectEnv
from tests.schedule.restart_project import stop


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    write_yaml(e.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    return e


@pytest.fixture
def old_job(env: ProjectEnv) -> Iterator[tuple[int, str]]:
    """A job started by other means than the role (the old run kill_old finds by its pattern);
    a `sleep` of a unique length, left to init by its shell; stopped by pid if still running."""
    marker = sleep_marker()
    pid = int(subprocess.run(["sh", "-c", f"sleep {marker} >/dev/null 2>&1 & echo $!"], capture_output=True,
                             text=True, check=True).stdout)
    yield pid, marker
    stop(pid, marker)
