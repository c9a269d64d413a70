"""A scheduled run whose own output cannot be written any more (its log file's disk full, or
past a file-size limit: here RLIMIT_FSIZE, which makes a write fail with EFBIG as a full disk
makes it fail with ENOSPC) goes on to its end: stopped there, it could have stopped the old
job and not started the new one. Its record says from when its output was lost, and its
alert (here: a later task fails) still says what it changed on the host."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from typing import Any

from tests.alerts import Alerts
from tests.conftest import write_yaml
from tests.helpers import ROOT, ProjectEnv

#: The run's file-size limit; its log file is filled up to ROOM bytes short of it.
LIMIT = 1024 * 1024
ROOM = 2000


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_run_whose_output_fails_goes_on_and_alerts_what_it_changed(env: ProjectEnv, alerts: Alerts) -> None:
    marker, later = env.root / "marker", env.root / "later"
    # The first task's lines fit in ROOM; the second task's banner (its long name) does not.
    write_yaml(env.project / "out.yml", [{"hosts": "all", "tasks": [
        {"name": "Write the marker", "copy": {"content": "x", "dest": str(marker)}},
        {"name": "Then a task with a long name " + "x" * (2 * ROOM), "debug": {"msg": "hi"}},
        {"name": "Write another", "copy": {"content": "y", "dest": str(later)}},
        {"name": "Then fail", "fail": {"msg": "the end"}}]}])
    added = env.run("schedule", "add", "nightly", "out.yml", "-i", "inv.yml", "--every", "1d", "--notify", alerts.url)
    assert added.rc == 0, added.err
    log = env.root / "run.log"
    log.write_bytes(b"." * (LIMIT - ROOM))
    environ = {**os.environ, **env.vars, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with log.open("ab") as out:
        proc = subprocess.run([sys.executable, "-m", "opsrunner", "schedule", "run", "nightly"], cwd=env.project,
                              env=environ, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                              preexec_fn=_limited)
    assert proc.returncode == 2, proc.stderr  # the play's own outcome: a task failed
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "WARNING: the output could not be written from " in proc.stderr, proc.stderr
    assert "File too large; the rest of it was dropped, and the command went on to its end" in proc.stderr
    assert marker.read_text() == "x" and later.read_text() == "y"  # the run went on past the lost output
    assert len(alerts.received) == 1, proc.stderr
    alert = alerts.received[0]
    assert "(exit 2)" in alert["title"], alert
    lines = str(alert["message"]).splitlines()
    block = lines[lines.index("what the run changed before it failed (the hosts are left so):"):]
    assert block[1] == "[node1]", lines
    assert block[2].startswith("  changed: Write the marker: "), lines
    assert block[3].startswith("  changed: Write another: "), lines
    [run] = env.history()
    assert run["exit_code"] == 2, run
    [lost, sent] = run["notes"]
    assert lost.startswith("the run's output could not be written from ") and lost.endswith(
        ": File too large; the run went on to its end"), run["notes"]
    assert sent == f"alert to {alerts.shown}: sent", run["notes"]



def _schedule_run(env: ProjectEnv, stdout: Any, stderr: Any) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, **env.vars, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "opsrunner", "schedule", "run", "nightly"], cwd=env.project,
                          env=environ, stdout=stdout, stderr=stderr, timeout=120, preexec_fn=_limited)


def test_a_run_whose_log_is_cut_says_so_in_its_alert(env: ProjectEnv, alerts: Alerts) -> None:
    """cron's `>> log 2>&1`: stderr's warning goes to the same full file, and where the history
    is on that disk too nothing else says the log is cut: the alert does."""
    write_yaml(env.project / "out.yml", [{"hosts": "all", "tasks": [
        {"name": "A task with a long name " + "x" * (2 * ROOM), "debug": {"msg": "hi"}},
        {"name": "Then fail", "fail": {"msg": "the end"}}]}])
    added = env.run("schedule", "add", "nightly", "out.yml", "-i", "inv.yml", "--every", "1d", "--notify", alerts.url)
    assert added.rc == 0, added.err
    log = env.root / "run.log"
    log.write_bytes(b"." * (LIMIT - ROOM))
    with log.open("ab") as out:
        assert _schedule_run(env, out, out).returncode == 2
    assert log.stat().st_size == LIMIT and b"Traceback" not in log.read_bytes()
    [alert] = alerts.received
    lines = str(alert["message"]).splitlines()
    [cut] = [line for line in lines if line.startswith("its log is cut: ")]
    assert cut.startswith("its log is cut: the run's output could not be written from "), lines
    assert cut.endswith(": File too large; the run went on to its end"), lines
    [run] = env.history()
    assert run["notes"][0] == cut.removeprefix("its log is cut: "), run


def test_a_run_whose_error_output_is_lost_says_so(env: ProjectEnv, alerts: Alerts) -> None:
    """stderr on a full disk (/dev/full), stdout fine: the record and the alert say the run's
    error output was lost (they looked at stdout only, and said nothing)."""
    write_yaml(env.project / "bad.yml", [{"hosts": "all", "tasks": [{"command": "true", "timeout": 5}]}])
    added = env.run("schedule", "add", "nightly", "bad.yml", "-i", "inv.yml", "--every", "1d", "--notify", alerts.url)
    assert added.rc == 0, added.err
    write_yaml(env.project / "bad.yml", [{"hosts": "all", "tasks": [{"command": "true", "timeout": "x"}]}])  # broken
    with open("/dev/full", "wb") as full:
        proc = _schedule_run(env, subprocess.PIPE, full)
    assert proc.returncode == 4, proc.stdout
    [run] = env.history()
    note = next(n for n in run["notes"] if "could not be written" in n)
    assert note.startswith("the run's error output could not be written from "), run["notes"]
    assert note.endswith(": No space left on device; the run went on to its end"), run["notes"]
    [alert] = alerts.received
    assert f"its log is cut: {note}" in str(alert["message"]).splitlines(), alert
