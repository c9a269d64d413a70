"""A scheduled run that failed (exit 2) or left a host unreachable (exit 3) after it changed
hosts is alerted with what it changed on each host, as a run stopped part way is: the shipped
restart whose new job died in its verify says that it killed the old job and launched one that
failed its verify, and that no rollback ran, or the rollback that put the last good run back;
an unreachable run names what it changed on the hosts it reached."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tests.alerts import Alerts
from tests.conftest import sleep_marker, wait_for, write_inventory, write_yaml
from tests.helpers import ProjectEnv
from tests.schedule.restart_project import alive, pidfile_pid, restart_project, stop
from tests.sshd import free_port

VERIFY = "Verify the run is up (processes, log growing, no errors)"


def _script(env: ProjectEnv, name: str, body: str) -> str:
    """A job as a script of its own: a plain command, launched (and relaunched by a rollback)
    without a shell around it, so the pidfile's pid is the job's."""
    path = env.root / "demo" / name
    write_yaml(path, f"#!/bin/sh\n{body}\n").chmod(0o755)
    return str(path)


def _dies(env: ProjectEnv) -> str:
    """A job that is up for a second, then exits 3: its verify (stable for 2 s or more) fails."""
    return _script(env, "dies.sh", "echo starting; sleep 1; exit 3")


@contextlib.contextmanager
def _a_good_run_first(env: ProjectEnv, old_job: tuple[int, str], **project_vars: Any) -> Iterator[str]:
    """The restart project with a good job (its sleep marker yielded) whose first run passed its
    verify, so the last good run is recorded; the job running at the end is stopped."""
    good = sleep_marker()
    restart_project(env, old_job[1], _script(env, "good.sh", f"echo up; exec sleep {good}"), verify_stable_for=2,
                    **project_vars)
    try:
        first = env.run("play", "restart_training.yml", "-i", "inv.yml")
        assert first.rc == 0, first.out + first.err
        yield good
    finally:
        stop(pidfile_pid(env), good)


def _failed_run(env: ProjectEnv, alerts: Alerts, playbook: str, code: int = 2) -> str:
    """`schedule run` of `playbook` (added as `nightly`), which fails with `code`; its alert's text."""
    added = env.run("schedule", "add", "nightly", playbook, "-i", "inv.yml", "--every", "1d", "--notify", alerts.url)
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "nightly")
    assert res.rc == code, res.out + res.err
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    return str(alerts.received[0]["message"])


def test_a_restart_whose_new_job_dies_alerts_the_kill_the_launch_and_that_no_rollback_ran(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    old_pid, old_marker = old_job
    restart_project(env, old_marker, _dies(env), verify_stable_for=3)
    message = _failed_run(env, alerts, "restart_training.yml")
    assert not alive(old_pid, old_marker)
    lines = message.splitlines()
    assert any(ln.startswith(f"- [box] {VERIFY}: ") for ln in lines), message  # the failure, as before
    block = lines[lines.index("what the run changed before it failed (the hosts are left so):"):]
    assert block[1] == "[box]", message
    assert any(ln.startswith(f"  changed: Stop the old run and confirm it is gone: killed 1: {old_pid} (")
               for ln in block), message
    [launch] = [ln for ln in block if ln.startswith("  changed: Launch the new run detached ")]
    launched = int(launch.split(": launched pid ")[1].split()[0])
    [note] = [ln for ln in block if "LAUNCHED" in ln]
    assert note.startswith("  LAUNCHED, FAILED VERIFY: what 'Launch the new run detached "), message
    assert f"launched failed '{VERIFY}': the job (pid {launched}) exited with code 3, " in note, message
    assert "; no rollback ran (no rollback: no last good run is recorded for this job " in note, message
    assert "NOT VERIFIED" not in message and "runs unchecked" not in message, message


def test_a_restart_rolled_back_after_its_new_job_died_alerts_the_rollback_not_no_rollback(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job) as good:  # its verify records the last good run
        write_yaml(env.project / "group_vars" / "all.yml", {"train_command": _dies(env)})  # the next launch dies
        message = _failed_run(env, alerts, "restart_training.yml")
        rolled_back = pidfile_pid(env)
        assert rolled_back is not None and alive(rolled_back, good)  # the last good run runs again
        block = message.splitlines()
        block = block[block.index("what the run changed before it failed (the hosts are left so):"):]
        assert any(ln.startswith("  changed: Launch the new run detached ") for ln in block), message
        [rollback] = [ln for ln in block if ln.startswith("  changed: Roll back to the last good run: ")]
        assert rollback.endswith(f": rolled back to the last good run's launch (no release: the code deployed in "
                                 f"place stays), pid {rolled_back}, verified"), message
        assert "no rollback ran" not in message and "LAUNCHED" not in message, message


def test_a_restart_whose_rollback_failed_too_alerts_the_failed_rollback(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job):
        _script(env, "good.sh", "echo starting; sleep 1; exit 3")  # the last good run's launch dies now too
        write_yaml(env.project / "group_vars" / "all.yml", {"train_command": _dies(env)})
        message = _failed_run(env, alerts, "restart_training.yml")
        block = message.splitlines()
        block = block[block.index("what the run changed before it failed (the hosts are left so):"):]
        [rollback] = [ln for ln in block if ln.startswith("  rollback FAILED: Roll back to the last good run: ")]
        assert rollback.split(": ", 2)[2].startswith("rollback to the last good run's launch (no release: the "
                                                    "code deployed in place stays) failed too: "), message
        assert rollback.endswith("; nothing is running"), message  # what runs now, however long the line
        assert "no rollback ran" not in message and "LAUNCHED" not in message, message


def test_an_unreachable_run_alerts_what_it_changed_on_the_hosts_it_reached(env: ProjectEnv, alerts: Alerts) -> None:
    done = env.root / "done.txt"
    write_inventory(env.project / "inv.yml", {"node1": {"connection": "local"},
                                              "gone": {"host": "127.0.0.1", "port": free_port()}})
    write_yaml(env.project / "touch.yml", [{"hosts": "all", "tasks": [
        {"name": "Write the marker", "copy": {"content": "done\n", "dest": str(done)}}]}])
    message = _failed_run(env, alerts, "touch.yml", code=3)
    assert done.read_text() == "done\n"
    block = message.splitlines()
    block = block[block.index("what the run changed before it failed (the hosts are left so):"):]
    assert block[1:3] == ["[node1]", f"  changed: Write the marker: {block[2].split(': ', 2)[2]}"], message
    assert "[gone]" in block and "  nothing: no task had ended changed on gone" in block, message


def test_an_unreachable_run_that_changed_nothing_says_nothing_of_changes(env: ProjectEnv, alerts: Alerts) -> None:
    write_inventory(env.project / "inv.yml", {"node1": {"connection": "local"},
                                              "gone": {"host": "127.0.0.1", "port": free_port()}})
    write_yaml(env.project / "look.yml", [{"hosts": "all", "tasks": [{"stat": {"path": str(env.root)}}]}])
    message = _failed_run(env, alerts, "look.yml", code=3)
    assert "UNREACHABLE (exit 3)" in message and "changed" not in message, message
