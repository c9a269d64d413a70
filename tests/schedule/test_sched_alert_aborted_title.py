"""The ABORTED alert names the playbook as every other alert of its schedule does: as the
schedule gives it (`playbooks/slow.yml`), not its file name alone; and `schedule add
slow.yml` of a playbook found in the project's playbooks/ is `slow.yml` in every alert, the
ABORTED one too (not `playbooks/slow.yml`, the path its row records)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.alerts import Alerts
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import ProjectEnv, stop


@pytest.mark.parametrize("given", ["playbooks/slow.yml", "slow.yml"])
def test_the_aborted_alert_names_the_playbook_as_the_schedule_gives_it(env: ProjectEnv, alerts: Alerts,
                                                                       given: str) -> None:
    slow = env.project / "playbooks" / "slow.yml"
    write_yaml(slow, [{"hosts": "all", "tasks": [{"pause": {"seconds": 60}}]}])
    added = env.run("schedule", "add", "slow", given, "-i", "inv.yml", "--at", "daily",
                    "--notify", alerts.url, "--notify-on", "always")
    assert added.rc == 0, added.err
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", "slow"], cwd=env.project,
                             env=dict(os.environ, PYTHONPATH=str(ROOT), **env.vars), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: env.history_db.exists() and any(r["result"] == "running" for r in env.history()),
                        60, 0.3)
        first.send_signal(signal.SIGKILL)  # its row left open: aborted, alerted by the next run
        first.wait(30)
    finally:
        stop(first)
    write_yaml(slow, [{"hosts": "all", "tasks": [{"debug": {"msg": "quick"}}]}])
    assert env.run("schedule", "run", "slow").rc == 0
    titles = [a["title"] for a in alerts.received]
    assert titles == [f"opsrunner: schedule slow ABORTED (controller gone): {given}",
                      f"opsrunner: schedule slow RECOVERED (exit 0): {given}"], titles
