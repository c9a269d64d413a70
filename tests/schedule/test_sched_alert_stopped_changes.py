"""A scheduled run stopped part way (SIGTERM to its process group) is alerted with what it
changed on each host before it stopped: the shipped restart stopped while it verifies says
that it killed the old job and launched a new one that nothing verified and no rollback
replaced; a run stopped before anything changed says that nothing did. A run whose
controller was killed (SIGKILL) mid-restart is alerted so by the next run, from what its
history recorded."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable

from tests.alerts import Alerts
from tests.conftest import sleep_marker, wait_for, write_yaml
from tests.helpers import ProjectEnv, opsrunner_process
from tests.schedule.restart_project import alive as _alive
from tests.schedule.restart_project import pidfile_pid, restart_project
from tests.schedule.restart_project import stop as _stop


def _restart_project(env: ProjectEnv, old_marker: str, new_marker: str) -> None:
    """The shipped restart; the job is a `sleep` that writes no log, so its verify keeps
    polling until the run is stopped."""
    restart_project(env, old_marker, f"sleep {new_marker}")


def _stopped_run(env: ProjectEnv, alerts: Alerts, playbook: str, when: Callable[[str], bool]) -> str:
    """`schedule run` in a session of its own, SIGTERM to its process group once `when` holds
    of its output; the alert's text."""
    added = env.run("schedule", "add", "nightly", playbook, "-i", "inv.yml", "--every", "1d",
                    "--notify", alerts.url)
    assert added.rc == 0, added.err
    output = env.root / "run.out"
    with output.open("w") as out, opsrunner_process("schedule", "run", "nightly", cwd=env.project, env=env.vars,
                                                    stdout=out, start_new_session=True) as proc:
        assert wait_for(lambda: when(output.read_text()), 60), output.read_text()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 143, output.read_text()
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    return str(alerts.received[0]["message"])


def test_a_restart_stopped_in_its_verify_alerts_the_kill_and_the_unverified_launch(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    old_pid, old_marker = old_job
    new_marker = sleep_marker()
    _restart_project(env, old_marker, new_marker)
    pidfile = env.root / "demo" / "train.pid"
    new_pid = None
    try:
        message = _stopped_run(env, alerts, "restart_training.yml", lambda out: "TASK [Verify" in out)
        new_pid = int(pidfile.read_text())
        # What the alert must tell: the old job is gone, the new one runs, unverified.
        assert not _alive(old_pid, old_marker) and _alive(new_pid, new_marker)
        lines = message.splitlines()
        assert "[box]" in lines, message
        assert any(ln.startswith(f"  changed: Stop the old run and confirm it is gone: killed 1: {old_pid} (")
                   for ln in lines), message
        assert any(ln.startswith("  changed: Launch the new run detached ") and f": launched pid {new_pid} " in ln
                   for ln in lines), message
        assert "  cut short: Verify the run is up (processes, log growing, no errors): interrupted (SIGTERM)" \
            in message, message
        assert "  LAUNCHED, NOT VERIFIED: what 'Launch the new run detached " in message, message
        assert "no verify passed after it; no rollback ran" in message, message
    finally:
        if new_pid is None and pidfile.exists():
            with contextlib.suppress(ValueError):
                new_pid = int(pidfile.read_text())
        _stop(new_pid, new_marker)


def test_a_run_stopped_before_anything_changed_says_nothing_changed(env: ProjectEnv, alerts: Alerts) -> None:
    started = env.root / "started"
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [
        {"name": "Look at the data", "stat": {"path": str(env.root)}},
        {"name": "Wait for the data", "shell": f"touch {started}; sleep 60"}]}])
    write_yaml(env.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    message = _stopped_run(env, alerts, "slow.yml", lambda _: started.exists())
    assert "what the run changed before it stopped (the hosts are left so):\n[node1]\n" \
           "  nothing: no task had ended changed on node1\n" \
           "  cut short: Wait for the data: interrupted (SIGTERM) while it ran on node1" in message, message
    assert "  changed: " not in message and "NOT VERIFIED" not in message, message


def test_a_restart_killed_in_its_verify_is_alerted_by_the_next_run_with_what_it_changed(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    old_pid, old_marker = old_job
    new_marker = sleep_marker()
    _restart_project(env, old_marker, new_marker)
    added = env.run("schedule", "add", "nightly", "restart_training.yml", "-i", "inv.yml", "--every", "1d",
                    "--notify", alerts.url)
    assert added.rc == 0, added.err
    output, new_pid = env.root / "run.out", None
    try:
        with output.open("w") as out, opsrunner_process("schedule", "run", "nightly", cwd=env.project,
                                                        env=env.vars, stdout=out, start_new_session=True) as proc:
            # in the verify, as its history knows (it records what ended before the task it is in)
            assert wait_for(lambda: env.history_db.exists() and any(  # a reader creates no history
                (r.get("current_task") or "").startswith("Verify ") for r in env.history()), 60, 0.2), \
                output.read_text()
            os.killpg(proc.pid, signal.SIGKILL)  # the controller and its local agent: no row closed, no alert
            proc.wait(60)
        new_pid = pidfile_pid(env)
        assert new_pid is not None and _alive(new_pid, new_marker) and not _alive(old_pid, old_marker)
        assert alerts.received == []
        write_yaml(env.project / "restart_training.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "quick"}}]}])
        nxt = env.run("schedule", "run", "nightly")
        assert nxt.rc == 0, nxt.out + nxt.err
        assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
        alert = alerts.received[0]
        assert alert["title"] == "opsrunner: schedule nightly ABORTED (controller gone): restart_training.yml"
        lines = str(alert["message"]).splitlines()
        assert "it was in task: Verify the run is up (processes, log growing, no errors)" in lines, lines
        block = lines[lines.index("what its record shows it changed before it stopped (the hosts are left so):"):]
        assert block[1] == "[box]", lines
        assert any(ln.startswith(f"  changed: Stop the old run and confirm it is gone: killed 1: {old_pid} (")
                   for ln in block), lines
        assert any(ln.startswith("  changed: Launch the new run detached ") and f": launched pid {new_pid} " in ln
                   for ln in block), lines
        [note] = [ln for ln in block if "LAUNCHED" in ln]
        assert note.startswith("  LAUNCHED, NOT VERIFIED: what 'Launch the new run detached "), lines
        assert note.endswith("runs unchecked: no verify passed after it; no rollback ran"), lines
        assert not any(ln.startswith("  cut short: ") for ln in block), lines  # a killed run records no such task
    finally:
        _stop(new_pid if new_pid is not None else pidfile_pid(env), new_marker)
