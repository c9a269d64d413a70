"""A scheduled run whose own output cannot be written any more (its log file's disk full, or
past a file-size limit: here RLIMIT_FSIZE, which makes a write fail with EFBIG as a full disk
makes it fail with ENOSPC) after it changed a host ends there, an unexpected error (exit 250),
and its alert still goes out, saying what it changed on the host before it failed."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from tests.alerts import Alerts
from tests.conftest import write_yaml
from tests.helpers import ROOT, ProjectEnv

#: The run's file-size limit; its log file is filled up to ROOM bytes short of it.
LIMIT = 1024 * 1024
ROOM = 2000


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_a_run_whose_output_fails_after_a_change_alerts_what_it_changed(env: ProjectEnv, alerts: Alerts) -> None:
    marker = env.root / "marker"
    # The first task's lines fit in ROOM; the second task's banner (its long name) does not.
    write_yaml(env.project / "out.yml", [{"hosts": "all", "tasks": [
        {"name": "Write the marker", "copy": {"content": "x", "dest": str(marker)}},
        {"name": "Then a task with a long name " + "x" * (2 * ROOM), "debug": {"msg": "hi"}}]}])
    added = env.run("schedule", "add", "nightly", "out.yml", "-i", "inv.yml", "--every", "1d", "--notify", alerts.url)
    assert added.rc == 0, added.err
    log = env.root / "run.log"
    log.write_bytes(b"." * (LIMIT - ROOM))
    environ = {**os.environ, **env.vars, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with log.open("ab") as out:
        proc = subprocess.run([sys.executable, "-m", "opsrunner", "schedule", "run", "nightly"], cwd=env.project,
                              env=environ, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
                              preexec_fn=_limited)
    assert proc.returncode == 250, proc.stderr
    assert "OSError: [Errno 27] File too large" in proc.stderr, proc.stderr
    assert marker.read_text() == "x"  # the host was changed before the output failed
    assert len(alerts.received) == 1, proc.stderr
    alert = alerts.received[0]
    assert "(exit 250)" in alert["title"], alert
    lines = str(alert["message"]).splitlines()
    assert "unexpected OSError (the traceback is in the run's log)" in lines, lines
    block = lines[lines.index("what the run changed before it failed (the hosts are left so):"):]
    assert block[1] == "[node1]", lines
    assert block[2].startswith("  changed: Write the marker: "), lines
    [run] = env.history()
    assert run["exit_code"] == 250 and run["notes"] == [f"alert to {alerts.url}: sent"], run
