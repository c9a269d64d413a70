"""A release that fails to start (launch_detached: the job exited at once) is alerted with
the log's last lines its task's message quotes, as crash and hang alerts quote verify's."""

from __future__ import annotations

from tests.alerts import Alerts
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv


def test_the_alert_of_a_job_that_exits_at_once_carries_its_log_tail(env: ProjectEnv, alerts: Alerts) -> None:
    script = "; ".join(f"print('line {i}')" for i in range(1, 9)) + "; import nonexistent_module_for_the_alert"
    write_yaml(env.project / "start.yml", [{"hosts": "all", "tasks": [{"name": "Start the job", "launch_detached": {
        "argv": ["python3", "-u", "-c", script], "log": str(env.root / "job.log"),
        "pidfile": str(env.root / "job.pid")}}]}])
    added = env.run("schedule", "add", "start", "start.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url)
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "start")
    assert res.rc == 2, res.out + res.err
    [alert] = alerts.received
    lines = alert["message"].splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("- [node1] Start the job: launched pid "))
    assert lines[head].endswith("exited at once with code 1"), lines
    assert lines[head + 1] == "  last log lines:", lines
    quoted = lines[head + 2:head + 7]
    assert quoted[-1] == "    ModuleNotFoundError: No module named 'nonexistent_module_for_the_alert'", lines
    assert all(ln.startswith("    ") for ln in quoted) and not lines[head + 7].startswith("    "), lines
