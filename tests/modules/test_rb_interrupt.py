"""The controller going away (SIGTERM, as Ctrl-C) while the automatic rollback verifies the
good run it relaunched leaves that run running, as it does while a normal restart verifies
its launch: the relaunch is done in a request of its own (the agent ends only the tree of
the request it is serving when the controller goes), not in the verify's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, kill_marked, wait_for, write_inventory
from tests.helpers import opsrunner_process, read_events
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import BAD_RELEASES, Job

ROLL_BACK = "Roll back to the last good run"


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


def test_sigterm_while_the_rollback_verifies_leaves_the_relaunched_good_run_running(
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
                               str(events), "--history", str(job.history), cwd=run) as controller:
            def relaunched() -> bool:
                started = any(e["event"] == "task_start" and e["task"] == ROLL_BACK for e in _events(events))
                record = _launch_record(job)
                return started and record.get("release") == good and bool(record.get("pid")) \
                    and job.running() == [target.side.host_pid(int(record["pid"]))]
            assert wait_for(relaunched, 60), controller.stdout.read() if controller.poll() is not None else ""
            pid = target.host_pid(job.demo / "train.pid")
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
        rc, out, _ = job.play("status.yml")
        assert rc == 0, out
        assert f"pid {int((job.demo / 'train.pid').read_text())}" in out and f"release {good}" in out
    finally:
        kill_marked(cleanup_marker)
