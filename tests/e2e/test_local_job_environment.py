"""What a local host runs gets the controller's environment less opsrunner's own virtualenv
(`source .venv/bin/activate` before `opsrunner play`): no VIRTUAL_ENV of it, no PATH entry of
its bin, so a job's `python3` is the one its user gets, whoever runs opsrunner. Everything
else the user set stays: other PATH entries, other variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_yaml
from tests.helpers import ProjectEnv

SHOW = 'echo "python3=$(command -v python3) venv=${VIRTUAL_ENV:-unset} mark=$USER_MARK path=$PATH"'


def test_a_local_job_does_not_inherit_the_venv_opsrunner_runs_in(tmp_path: Path) -> None:
    venv = tmp_path / "opsrunner-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    user_bin = tmp_path / "user-bin"
    user_bin.mkdir()
    env = ProjectEnv(tmp_path)
    write_yaml(env.project / "inv.yml", {"all": {"hosts": {
        "by-agent": {"connection": "local"}, "bare": {"connection": "local", "command_exec": "bare"}}}})
    write_yaml(env.project / "site.yml", [{"hosts": "all", "tasks": [{"name": "Show", "shell": SHOW}]}])
    activated = {**env.vars, "VIRTUAL_ENV": str(venv), "USER_MARK": "kept-7f",
                 "PATH": os.pathsep.join([str(venv / "bin"), str(user_bin), os.environ["PATH"]]),
                 # opsrunner's own packages, for the venv's interpreter, which has none
                 "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *filter(None, sys.path)])}
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "opsrunner", "play", "site.yml", "-i", "inv.yml",
                          "-v"], cwd=env.project, env=activated, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [line for line in res.stdout.splitlines() if "python3=" in line]
    assert len(lines) == 2, res.stdout
    for line in lines:
        shown = dict(part.split("=", 1) for part in line[line.index("python3="):].split(" "))
        assert not shown["python3"].startswith(str(venv)) and shown["python3"], line
        assert shown["venv"] == "unset"
        assert shown["mark"] == "kept-7f"
        entries = shown["path"].split(os.pathsep)
        assert str(venv / "bin") not in entries
        assert entries[0] == str(user_bin) and entries[1:] == os.environ["PATH"].split(os.pathsep)
