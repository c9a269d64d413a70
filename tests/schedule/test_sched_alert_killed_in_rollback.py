"""A scheduled restart whose controller was killed (SIGKILL) inside its rollback, after the
rollback had relaunched the last good run, is alerted by the next run as a rollback cut short
with what its record shows it did (the relaunched pid), never as a failed launch that "no
rollback" followed."""

from __future__ import annotations

import json
import os
import signal
import time

from tests.alerts import Alerts
from tests.conftest import sleep_marker, wait_for, write_yaml
from tests.helpers import ProjectEnv, opsrunner_process
from tests.schedule.restart_project import alive, pidfile_pid, restart_project, stop

ROLLBACK = "Roll back to the last good run"


def _script(env: ProjectEnv, name: str, body: str) -> str:
    path = env.root / "demo" / name
    write_yaml(path, f"#!/bin/sh\n{body}\n").chmod(0o755)
    return str(path)


def _in_rollback(env: ProjectEnv) -> bool:
    return any(r.get("current_task") == ROLLBACK for r in env.history())


def test_a_restart_killed_in_its_rollback_alerts_the_rollback_cut_short_and_what_it_relaunched(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    good = sleep_marker()
    restart_project(env, old_job[1], _script(env, "good.sh", f"echo up; exec sleep {good}"), verify_stable_for=2,
                    releases=True, train_chdir=str(env.root / "demo" / "code" / "current"))
    relaunched = None
    try:
        first = env.run("play", "restart_training.yml", "-i", "inv.yml")  # a good last run, recorded by its verify
        assert first.rc == 0, first.out + first.err
        first_pid = pidfile_pid(env)
        # the next launch dies at once; the rollback's verify of the run it relaunches takes 30 s
        write_yaml(env.project / "group_vars" / "all.yml", {
            "train_command": _script(env, "dies.sh", "echo starting; sleep 1; exit 3"), "verify_stable_for": 30})
        added = env.run("schedule", "add", "nightly", "restart_training.yml", "-i", "inv.yml", "--every", "1d",
                        "--notify", alerts.url)
        assert added.rc == 0, added.err
        output = env.root / "run.out"
        with output.open("w") as out, opsrunner_process("schedule", "run", "nightly", cwd=env.project, env=env.vars,
                                                        stdout=out, start_new_session=True) as proc:
            def rolled_back() -> bool:
                pid = pidfile_pid(env)
                return pid not in (None, first_pid) and alive(pid, good)

            assert wait_for(lambda: rolled_back() and _in_rollback(env), 120, 0.3), output.read_text()
            relaunched = pidfile_pid(env)
            time.sleep(1.0)  # its record of the relaunch written (within WRITE_SOON_S); its verify goes on
            os.killpg(proc.pid, signal.SIGKILL)  # the controller and its local agent: no row closed, no alert
            proc.wait(60)
        assert relaunched is not None and alive(relaunched, good), "the relaunched last good run outlives the kill"
        write_yaml(env.project / "restart_training.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "quick"}}]}])
        nxt = env.run("schedule", "run", "nightly")
        assert nxt.rc == 0, nxt.out + nxt.err
        assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
        message = str(alerts.received[0]["message"])
        lines = message.splitlines()
        assert f"it was in task: {ROLLBACK}" in lines, message
        [cut] = [ln for ln in lines if ln.startswith(f"  cut short: {ROLLBACK}: ")]
        # what the record shows the rollback did: it relaunched the last good run, not verified yet
        assert cut.startswith(f"  cut short: {ROLLBACK}: rollback interrupted after its start step: "), message
        assert f"pid {relaunched} started from release " in cut and cut.endswith(", not verified (not recorded as "
                                                                                 "the last good run)"), message
        assert "no rollback ran" not in message and "FAILED VERIFY" not in message, message
        # `show` of the killed run says the same: the task it was in and what it had done so far
        listed = env.run("history", "--json")
        [killed] = [r for r in json.loads(listed.out) if (r.get("in_flight") or {}).get("so_far")]
        shown = env.run("show", killed["id"])
        assert f"  was in    {ROLLBACK}" in shown.out, shown.out
        [so_far] = [ln for ln in shown.out.splitlines() if ln.startswith("  so far    [")]
        assert "rollback interrupted after its start step: " in so_far and f"pid {relaunched} started" in so_far, \
            shown.out
    finally:
        stop(relaunched if relaunched is not None else pidfile_pid(env), good)
