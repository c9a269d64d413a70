"""What a schedule's last result is when its runs overlap or one is killed: the run that
ended last (a run refused by the run lock while an earlier one went on does not hide that
one's outcome, known later), a recovery is announced only after a failure that was itself
the previous outcome, and a run killed with SIGKILL (its row left open: aborted, controller
gone) is alerted by the next run of its schedule, once, and counts as a failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.alerts import Alerts
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import ProjectEnv, stop


def _pause(env: ProjectEnv, seconds: int) -> None:
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [{"pause": {"seconds": seconds}}]}])


def _start(env: ProjectEnv, name: str) -> subprocess.Popen[str]:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env.vars)
    return subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", name], cwd=env.project,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running(env: ProjectEnv) -> bool:
    return env.history_db.exists() and any(r["result"] == "running" for r in env.history())


def _listed(env: ProjectEnv) -> list[str]:
    res = env.run("schedule", "list")
    assert res.rc == 0, res.err
    [row] = [line.split() for line in res.out.splitlines()[1:]]
    return row


def _titles(alerts: Alerts) -> list[str]:
    return [a["title"].split(" (")[0].removeprefix("opsrunner: schedule slow ") for a in alerts.received]


def test_a_refused_overlapping_run_does_not_hide_the_outcome_that_ended_after_it(env: ProjectEnv,
                                                                                 alerts: Alerts) -> None:
    _pause(env, 6)
    added = env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily",
                    "--notify", alerts.url, "--notify-on", "recovery")
    assert added.rc == 0, added.err
    first = _start(env, "slow")
    try:
        assert wait_for(lambda: _running(env), 60, 0.3)
        second = env.run("schedule", "run", "slow")
        assert second.rc == 2 and "locked by " in second.err, second.err
        assert _listed(env)[4] == "running"  # the run going on is the schedule's state meanwhile
        assert first.wait(60) == 0
    finally:
        stop(first)
    runs = env.history()  # newest start first: the refused run, then the first one
    assert [r["result"] for r in runs] == ["refused", "ok"]
    assert runs[1]["ended"] > runs[0]["ended"]
    assert _listed(env)[4:6] == ["ok", f"({runs[1]['id']})"]
    _pause(env, 0)
    assert env.run("schedule", "run", "slow").rc == 0
    # the refusal was the previous outcome of the first run only: one recovery, not two
    assert _titles(alerts) == ["REFUSED", "RECOVERED"]


@pytest.mark.parametrize("notify_on, expected", [("failure", ["ABORTED"]), ("recovery", ["ABORTED", "RECOVERED"])])
def test_a_killed_run_is_alerted_by_the_next_run_once(env: ProjectEnv, alerts: Alerts, notify_on: str,
                                                      expected: list[str]) -> None:
    _pause(env, 60)
    added = env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily",
                    "--notify", alerts.url, "--notify-on", notify_on, "--dashboard", "http://127.0.0.1:8765/")
    assert added.rc == 0, added.err
    first = _start(env, "slow")
    try:
        assert wait_for(lambda: _running(env), 60, 0.3)
        first.send_signal(signal.SIGKILL)  # as the OOM killer does: no row closed, no alert
        first.wait(30)
    finally:
        stop(first)
    [killed] = env.history()
    assert killed["result"] == "aborted (controller gone)" and alerts.received == []
    _pause(env, 0)
    nxt = env.run("schedule", "run", "slow")
    assert nxt.rc == 0, nxt.err
    assert _titles(alerts) == expected
    alert = alerts.received[0]
    assert alert["title"] == "opsrunner: schedule slow ABORTED (controller gone): slow.yml"
    assert f"run {killed['id']}, started {killed_started(killed)}" in alert["message"]
    assert f"dashboard: http://127.0.0.1:8765/runs/{killed['id']}" in alert["message"]
    newest = env.history()[0]
    assert f"noticed by the next run {newest['id']} (ok, exit 0)" in alert["message"]
    assert env.run("schedule", "run", "slow").rc == 0  # alerted once: the run after says nothing of it
    assert _titles(alerts) == expected


def killed_started(run: dict[str, object]) -> str:
    import datetime as dt

    started = run["started"]
    assert isinstance(started, float | int)
    return dt.datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M:%S")
