"""The controller going away (SIGTERM, as Ctrl-C) while the automatic rollback verifies the
good run it relaunched leaves that run running, as it does while a normal restart verifies
its launch: the relaunch is done in a request of its own (the agent ends only the tree of
the request it is serving when the controller goes), not in the verify's. And the run records
the rollback as interrupted (console, JSON events, history), saying what the target did: not
the failed verify as the last task and a recap of failed=0 rescued=1."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, kill_marked, wait_for, write_inventory
from tests.helpers import cli, opsrunner_process, read_events
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import BAD_RELEASES, Job

ROLL_BACK = "Roll back to the last good run"
VERIFY = "Verify the run is up (processes, log growing, no errors)"


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _events(path: Path) -> list[dict[str, Any]]:
    return read_events(path) if path.exists() else []


def _launch_record(job: Job) -> dict[str, Any]:
    try:
        return dict(json.loads((job.demo / "train.launch.json").read_text()))
    except (OSError, ValueError):
        return {}


def test_sigterm_while_the_rollback_verifies_leaves_the_good_run_running_and_records_it_interrupted(
        target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    job.vars["verify_stable_for"] = 8  # the rollback's verify lasts long enough to be interrupted in
    try:
        rc, out, _ = job.play("restart_training.yml")
        assert rc == 0, out
        good = job.good()["release"]
        job.write_src("crash", BAD_RELEASES["crashes"])

        run = Path(tempfile.mkdtemp(prefix="run", dir=target.work))
        (run / "roles").symlink_to(ROOT / "roles")
        shutil.copy(ROOT / "playbooks" / "restart_training.yml", run)
        inv = write_inventory(run / "inv.yml", {"target": target.host_vars}, groups={"trainers": ["target"]},
                              all_vars={**job.vars, "code_src": str(job.src / "crash")})
        events = run / "events.jsonl"
        with opsrunner_process("play", str(run / "restart_training.yml"), "-i", str(inv), "--json-events",
                               str(events), "--history", str(job.history), "--no-color", cwd=run) as controller:
            def relaunched() -> bool:
                started = any(e["event"] == "task_start" and e["task"] == ROLL_BACK for e in _events(events))
                record = _launch_record(job)
                # The launch writes its record, then the pidfile (remote/launch.py): both, or a look
                # between the two finds no pidfile.
                return started and record.get("release") == good and bool(record.get("pid")) \
                    and job.running() == [target.side.host_pid(int(record["pid"]))] \
                    and (job.demo / "train.pid").exists()
            assert wait_for(relaunched, 60), controller.stdout.read() if controller.poll() is not None else ""
            pid = target.host_pid(job.demo / "train.pid")
            target_pid = int((job.demo / "train.pid").read_text())  # as the target names it
            time.sleep(1.5)  # the rollback is verifying it now (8 s of stable checks)
            assert controller.poll() is None and not any(
                e["event"] == "task_end" and e["task"] == ROLL_BACK for e in _events(events))
            controller.send_signal(signal.SIGTERM)
            out = controller.communicate(timeout=60)[0]
            assert controller.returncode == 143, out

        time.sleep(3)  # what the agent does when its controller goes, it has done by now
        assert job.running() == [pid], (job.running(), pid, out)
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"
        assert not (job.demo / "train.exit").exists()

        # The JSON events: the rollback's result, interrupted, on its host, saying what ran there.
        evs = read_events(events)
        ends = [e for e in evs if e["event"] == "task_end"]
        assert [e["task"] for e in ends[-2:]] == [VERIFY, ROLL_BACK], [e["task"] for e in ends]
        verify_end, rollback = ends[-2:]
        assert verify_end["status"] == "failed"
        assert rollback["status"] == "interrupted" and rollback["host"] == "target", rollback
        msg = rollback["msg"]
        assert "rollback interrupted after its start step" in msg, msg
        assert f"pid {target_pid}" in msg and f"release {good}" in msg and "not verified" in msg, msg
        assert msg.startswith(f"{VERIFY} failed: "), msg  # what failed first, as the rollback's line says
        recap = evs[-1]
        assert recap["event"] == "recap" and recap["interrupted"] is True and recap["signal"] == "SIGTERM"
        assert recap["in_flight"] == [{"host": "target", "task": ROLL_BACK}], recap
        assert recap["hosts"]["target"]["failed"] == 1 and recap["hosts"]["target"]["rescued"] == 1, recap

        # The console: the result line and a recap that names the task cut short.
        assert re.search(rf"^interrupted: \[target\]: INTERRUPTED! => .*pid {target_pid}", out, re.M), out
        assert re.search(r"^target\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=1\s", out, re.M), out
        assert f"interrupted: run stopped by SIGTERM during '{ROLL_BACK}' on target" in out, out

        # The history (show, the dashboard and alerts read it): the rollback is the last task.
        res = cli("show", "last", "--json", "--history", str(job.history))
        row = json.loads(res.out)
        assert row["exit_code"] == 143 and row["recap"]["target"]["failed"] == 1, row
        last = row["tasks"][-1]
        assert (last["task"], last["host"], last["status"]) == (ROLL_BACK, "target", "interrupted"), last
        assert f"pid {target_pid}" in last["msg"] and f"release {good}" in last["msg"], last
        shown = cli("show", "last", "--history", str(job.history)).out
        assert f"interrupted: [target] {ROLL_BACK}" in shown, shown
        rc, out, _ = job.play("status.yml")
        assert rc == 0, out
        assert f"pid {int((job.demo / 'train.pid').read_text())}" in out and f"release {good}" in out
    finally:
        kill_marked(cleanup_marker)
