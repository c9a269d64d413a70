"""A scheduled run stopped by SIGTERM while a task runs is alerted naming that task as
interrupted (the history records it so), not with an empty list of what went wrong."""

from __future__ import annotations

import signal

from tests.alerts import Alerts
from tests.conftest import wait_for, write_yaml
from tests.helpers import ProjectEnv, opsrunner_process


def test_the_alert_of_a_terminated_run_names_the_task_it_stopped(env: ProjectEnv, alerts: Alerts) -> None:
    started = env.root / "started"
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [{"name": "Wait for the data", "shell":
                                                                     f"touch {started}; sleep 60"}]}])
    added = env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url)
    assert added.rc == 0, added.err
    with opsrunner_process("schedule", "run", "slow", cwd=env.project, env=env.vars) as proc:
        assert wait_for(started.exists, 60)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, out
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    message = alerts.received[0]["message"]
    assert "- [node1] Wait for the data: interrupted (SIGTERM) while it ran on node1" in message, message
