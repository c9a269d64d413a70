"""The timer and the cron line run the opsrunner that `schedule add` ran with, not an
`opsrunner/` folder of the project they run in (the project may be an opsrunner checkout):
the written command lines, run as systemd and cron run them (the project as working
directory, a bare environment), with a decoy package in the project that fails if imported."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers import ProjectEnv


def bare_run(argv: list[str], env: ProjectEnv, cwd: Path) -> subprocess.CompletedProcess[str]:
    """As systemd or cron start it: a bare environment; PYTHONPATH stands for the venv that
    `add` ran from (the checkout under test)."""
    home = env.root / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(ROOT)})


def recorded(env: ProjectEnv) -> list[str]:
    """The schedules of the recorded runs (read from outside the project and its decoy)."""
    res = env.run("history", "--json", cwd=env.root)
    assert res.rc == 0, res.err
    return [r["schedule"] for r in json.loads(res.out)]


def decoy(project: Path) -> None:
    (project / "opsrunner").mkdir()
    (project / "opsrunner" / "__init__.py").write_text("raise SystemExit('the project copy of opsrunner ran')\n")


def test_the_unit_runs_add_s_opsrunner_not_the_project_s(env: ProjectEnv) -> None:
    assert env.run("schedule", "add", "own", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    decoy(env.project)
    service = (env.root / "units" / "opsrunner-own.service").read_text()
    (start,) = [ln.removeprefix("ExecStart=") for ln in service.splitlines() if ln.startswith("ExecStart=")]
    (workdir,) = [ln.removeprefix("WorkingDirectory=") for ln in service.splitlines()
                  if ln.startswith("WorkingDirectory=")]
    res = bare_run(shlex.split(start), env, Path(workdir))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "project copy" not in res.stderr and recorded(env) == ["own"]


def test_the_cron_line_runs_add_s_opsrunner_not_the_project_s(env: ProjectEnv) -> None:
    assert env.run("schedule", "add", "own", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron").rc == 0
    decoy(env.project)
    (line,) = (env.root / "crontab").read_text().splitlines()
    command = line.split(None, 5)[5]  # after the five time fields: what cron gives to /bin/sh -c
    res = bare_run(["/bin/sh", "-c", command], env, env.root / "home")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "project copy" not in res.stderr and recorded(env) == ["own"]
