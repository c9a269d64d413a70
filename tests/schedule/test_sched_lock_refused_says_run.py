"""A scheduled run refused by the run lock is recorded, and says its run id as other runs do."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import ProjectEnv


def test_a_run_refused_by_the_run_lock_prints_its_run_id(env: ProjectEnv) -> None:
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [{"pause": {"seconds": 5}}]}])
    assert env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    manual = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                              cwd=env.project, env=dict(os.environ, PYTHONPATH=str(ROOT), **env.vars),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        locks = env.root / "state" / "opsrunner" / "locks"
        assert wait_for(lambda: any(f.read_text() for f in locks.glob("*.lock")), 30)
        res = env.run("schedule", "run", "slow")
    finally:
        manual.communicate(timeout=60)
    assert res.rc == 2 and "locked by " in res.err, res.err
    (refused,) = [r for r in env.history() if r["schedule"] == "slow"]
    assert res.out == f"run {refused['id']} (opsrunner show {refused['id']})\n", res.out
