"""Two local hosts, h1 and h2, in a test's project dir: a task that runs on one may leave a
file named after it in `{{ out }}` (touched() lists them), so "nothing ran" is observed."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_yaml
from tests.helpers import CliResult, ProjectEnv


def local_project(tmp_path: Path) -> ProjectEnv:
    env = ProjectEnv(tmp_path)
    local = {"connection": "local"}
    write_yaml(env.project / "inv.yml", {"all": {"hosts": {"h1": local, "h2": local},
                                                 "vars": {"out": str(env.root / "out")}}})
    (env.root / "out").mkdir()
    return env


def touched(env: ProjectEnv) -> list[str]:
    return sorted(p.name for p in (env.root / "out").iterdir())


def play(env: ProjectEnv, name: str, *args: str) -> CliResult:
    return env.run("play", name, "-i", "inv.yml", *args)
