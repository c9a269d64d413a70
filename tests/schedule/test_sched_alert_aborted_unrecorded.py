"""The ABORTED alert of a run whose controller was killed (SIGKILL) after a task changed its
host says from when that run's results may be missing, and never that no task changed
anything: what its history kept may lack its last results."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

from tests.alerts import Alerts
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import ProjectEnv, stop

GAP = re.compile(r"results after (\d\d:\d\d:\d\d) may be missing: its controller is gone")


def test_the_aborted_alert_says_from_when_results_may_be_missing(env: ProjectEnv, alerts: Alerts,
                                                                 cleanup_marker: str) -> None:
    touched = env.root / "touched"
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "change the host", "command": f"touch {touched}"},
        {"name": "block", "command": f"sleep {cleanup_marker}"}]}])
    added = env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url)
    assert added.rc == 0, added.err
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env.vars)
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", "slow"], cwd=env.project,
                             env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        assert wait_for(lambda: env.history_db.exists() and any(r.get("current_task") == "block"
                                                                 for r in env.history()), 60, 0.1)
        first.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)  # what it left: its agent, the sleep
        first.wait(30)
    finally:
        stop(first)
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"debug": {"msg": "x"}}]}])
    assert env.run("schedule", "run", "slow").rc == 0
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    lines = str(alerts.received[0]["message"]).splitlines()
    [gap] = [ln for ln in lines if ln.startswith("record incomplete: ")]
    assert GAP.search(gap), lines
    # its start recorded as the task it was in: the changed result before it is recorded too
    assert "it was in task: block" in lines and any(ln.startswith("  changed: change the host") for ln in lines), lines
    assert not any("no task had changed anything" in ln for ln in lines), lines


def test_the_aborted_alert_says_what_its_record_shows_changed(env: ProjectEnv, alerts: Alerts,
                                                              cleanup_marker: str) -> None:
    """The changes of a run whose controller is gone are what its record kept: said so, never
    'what the run changed' (its last results may be missing)."""
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "change the host", "command": f"touch {env.root / 'touched'}"},
        {"name": "block", "command": f"sleep {cleanup_marker}"}]}])
    assert env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily", "--notify",
                   alerts.url).rc == 0
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env.vars)
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", "slow"], cwd=env.project,
                             env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        assert wait_for(lambda: env.history_db.exists() and any(
            [t.get("task") for t in r.get("tasks", [])] == ["change the host"] for r in env.history()), 60, 0.1)
        first.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        stop(first)
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"debug": {"msg": "x"}}]}])
    assert env.run("schedule", "run", "slow").rc == 0
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    lines = str(alerts.received[0]["message"]).splitlines()
    assert "what its record shows it changed before it stopped (the hosts are left so):" in lines, lines
    assert not any(ln.startswith("what the run changed") for ln in lines), lines
