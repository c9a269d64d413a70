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
from collections.abc import Callable
from typing import Any

from tests.alerts import Alerts
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import ProjectEnv, stop

GAP = re.compile(r"results after (\d\d:\d\d:\d\d) may be missing: its controller is gone")


def _killed_then_alerted(env: ProjectEnv, alerts: Alerts, marker: str,
                         killed_when: Callable[[dict[str, Any]], bool]) -> list[str]:
    """A scheduled run that changes its host, then blocks, SIGKILLed once a history row shows
    `killed_when`; the next run's ABORTED alert, as lines."""
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "change the host", "command": f"touch {env.root / 'touched'}"},
        {"name": "block", "command": f"sleep {marker}"}]}])
    added = env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url)
    assert added.rc == 0, added.err
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", "slow"], cwd=env.project,
                             env=dict(os.environ, PYTHONPATH=str(ROOT), **env.vars), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(lambda: env.history_db.exists() and any(killed_when(r) for r in env.history()), 60, 0.1)
        first.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)  # what it left in its own session: its agent, the sleep
        first.wait(30)
    finally:
        stop(first)
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"debug": {"msg": "x"}}]}])
    assert env.run("schedule", "run", "slow").rc == 0
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    return str(alerts.received[0]["message"]).splitlines()


def test_the_aborted_alert_says_from_when_results_may_be_missing(env: ProjectEnv, alerts: Alerts,
                                                                 cleanup_marker: str) -> None:
    lines = _killed_then_alerted(env, alerts, cleanup_marker, lambda r: r.get("current_task") == "block")
    [gap] = [ln for ln in lines if ln.startswith("record incomplete: ")]
    assert GAP.search(gap), lines
    # its start recorded as the task it was in: the changed result before it is recorded too
    assert "it was in task: block" in lines and any(ln.startswith("  changed: change the host") for ln in lines), lines
    assert not any("no task had changed anything" in ln for ln in lines), lines


def test_the_aborted_alert_says_what_its_record_shows_changed(env: ProjectEnv, alerts: Alerts,
                                                              cleanup_marker: str) -> None:
    """The changes of a run whose controller is gone are what its record kept: said so, never
    'what the run changed' (its last results may be missing)."""
    lines = _killed_then_alerted(env, alerts, cleanup_marker,
                                 lambda r: [t.get("task") for t in r.get("tasks", [])] == ["change the host"])
    assert "what its record shows it changed before it stopped (the hosts are left so):" in lines, lines
    assert not any(ln.startswith("what the run changed") for ln in lines), lines
