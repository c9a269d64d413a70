"""A project with one local host and a one-task playbook, for the schedule tests that need
nothing more (a test file may define its own `env`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import ProjectEnv


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    write_yaml(e.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    return e
