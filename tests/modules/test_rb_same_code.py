"""A redeploy of the code that runs (no new release) with a bad launch argument or a bad check
fails and is rolled back: that does not condemn the code. Its release's verdict stays
"passed", with the failed run kept beside it (`failed_run`, saying what differed); the
automatic rollback warns of no "release recorded as failed"; an interrupted rollback leaves
the release passed (a later hand rollback goes to it) and does not claim a switch of
`current` that changed nothing; and the one line names the check that failed, not a process
listing. A failure with the very settings the release passed with still makes it "failed",
and a rollback that then goes to it says why: it is the last good run's release, not named."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, kill_marked, wait_for, write_inventory
from tests.helpers import opsrunner_process, read_events, task_ends
from tests.modules.conftest import Target
from tests.modules.test_rb_restore import FAIL_FLAG, FAILS_WHEN_FLAGGED, restart_with
from tests.modules.test_releases_rollback import BAD_RELEASES, FAIL, LINE, ROLL_BACK, Job, module_ends, process

VERIFY = "Verify the run is up (processes, log growing, no errors)"
CRASH_ARGS = "train_extra_args=--crash-after=3"


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _verdict(job: Job, release: str) -> dict[str, Any]:
    return dict(json.loads((job.demo / "code" / "releases" / f"{release}.verdict.json").read_text()))


def _same_release(events: list[dict[str, Any]], release: str) -> None:
    (deploy,) = module_ends(events, "deploy_code")
    assert deploy["data"]["release"] == release and deploy["status"] == "ok", deploy  # no new release


def test_bad_launch_arguments_leave_the_release_passed(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        assert _verdict(job, good)["state"] == "passed"

        rc, out, events = job.play("restart_training.yml", "-e", CRASH_ARGS)
        assert rc == 2, out
        _same_release(events, good)
        (fail,) = task_ends(events, FAIL)
        line = LINE.match(fail["msg"])
        assert line and line["release"] == good and "code 1" in line["why"], fail["msg"]
        (rolled,) = task_ends(events, ROLL_BACK)
        assert rolled["status"] == "changed" and not rolled.get("warnings"), rolled
        assert "recorded as failed" not in out and "known to have failed" not in out, out

        verdict = _verdict(job, good)
        assert verdict["state"] == "passed", verdict
        assert verdict["failed_run"]["differs"] == ["launch"], verdict
        assert "code 1" in verdict["failed_run"]["why"] and verdict["failed_run"]["pid"] != verdict["pid"]
        assert oct((job.demo / "code" / "releases" / f"{good}.verdict.json").stat().st_mode & 0o777) == "0o600"
        assert "--crash-after=3" not in process(target.host_pid(job.demo / "train.pid"))[0]
    finally:
        kill_marked(cleanup_marker)


def test_a_ready_line_that_never_comes_is_named_as_the_failed_check(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]

        rc, out, events = job.play("restart_training.yml", "-e", "ready_regex=NEVERMATCHES")
        assert rc == 2, out
        (verified,) = task_ends(events, VERIFY)
        assert verified["msg"].startswith("log_regex: expected log matches /NEVERMATCHES/, got no match\n"), verified
        (fail,) = task_ends(events, FAIL)
        assert fail["msg"].startswith(f"{VERIFY} failed: log_regex: expected log matches /NEVERMATCHES/, got no "
                                      "match (checked for "), fail["msg"]
        assert "running: " not in fail["msg"], fail["msg"]
        # the run put back is verified with the ready line it printed, not the new one
        assert fail["msg"].endswith(f"; rolled back to release {good} (no git commit), pid "
                                    f"{(job.demo / 'train.pid').read_text().strip()}, verified with the checks of "
                                    "its good run (log_regex)"), fail["msg"]
        verdict = _verdict(job, good)
        assert verdict["state"] == "passed" and verdict["failed_run"]["differs"] == ["checks"], verdict
    finally:
        kill_marked(cleanup_marker)


def _launch_record(job: Job) -> dict[str, Any]:
    try:
        return dict(json.loads((job.demo / "train.launch.json").read_text()))
    except (OSError, ValueError):
        return {}


def _events(path: Path) -> list[dict[str, Any]]:
    return read_events(path) if path.exists() else []


def test_ctrl_c_in_the_rollback_of_the_same_code_leaves_it_passed(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    job.vars["verify_stable_for"] = 8  # the rollback's verify lasts long enough to be interrupted in
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        run = Path(tempfile.mkdtemp(prefix="run", dir=target.work))
        (run / "roles").symlink_to(ROOT / "roles")
        shutil.copy(ROOT / "playbooks" / "restart_training.yml", run)
        inv = write_inventory(run / "inv.yml", {"target": target.host_vars}, groups={"trainers": ["target"]},
                              all_vars=job.vars)
        events = run / "events.jsonl"
        with opsrunner_process("play", str(run / "restart_training.yml"), "-i", str(inv), "-e", CRASH_ARGS,
                               "--json-events", str(events), "--no-color", cwd=run) as controller:
            def relaunched() -> bool:  # the good launch again (the failed one ran the same release)
                started = any(e["event"] == "task_start" and e["task"] == ROLL_BACK for e in _events(events))
                record = _launch_record(job)
                return started and bool(record.get("pid")) and "--crash-after=3" not in record.get("argv", []) \
                    and job.running() == [target.side.host_pid(int(record["pid"]))] \
                    and (job.demo / "train.pid").exists()
            assert wait_for(relaunched, 60), controller.stdout.read() if controller.poll() is not None else ""
            time.sleep(1.5)  # the rollback is verifying it now (8 s of stable checks)
            assert controller.poll() is None
            controller.send_signal(signal.SIGINT)
            out = controller.communicate(timeout=60)[0]
            assert controller.returncode == 99, out

        (rollback,) = [e for e in read_events(events) if e["event"] == "task_end" and e["task"] == ROLL_BACK]
        assert rollback["status"] == "interrupted", rollback
        assert f"; current already names {good}; pid " in rollback["msg"], rollback["msg"]
        assert f"switched from {good} to {good}" not in out + rollback["msg"], rollback["msg"]
        assert _verdict(job, good)["state"] == "passed", _verdict(job, good)

        # Unverified, the run put back is left running; a newer release replaces it and passes.
        # A hand rollback then goes back to the release whose code passed.
        good2 = restart_with(job, "good2")
        rc, out, done = job.play("rollback.yml")
        assert rc == 0, out
        (back,) = module_ends(done, "rollback")
        assert back["msg"].startswith(f"rolled back to release {good} (no git commit), pid "), back["msg"]
        assert good2 != good and job.good()["release"] == good
    finally:
        kill_marked(cleanup_marker)


def test_a_failure_with_the_settings_it_passed_with_condemns_the_release(target: Target,
                                                                       cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        good = restart_with(job, "flagged", FAILS_WHEN_FLAGGED)
        (job.demo / FAIL_FLAG).write_text("")  # the same code and launch now fail to start
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "flagged"))
        assert rc == 2, out
        _same_release(events, good)
        (fail,) = task_ends(events, FAIL)
        assert f"; rollback to release {good} (no git commit) failed too: " in fail["msg"], fail["msg"]
        assert "known to have failed" not in fail["msg"], fail["msg"]  # not before this restart
        verdict = _verdict(job, good)
        assert verdict["state"] == "failed" and "code 1" in verdict["why"], verdict
        assert wait_for(lambda: job.running() == [], 5)

        # The next restart (new code) fails; its rollback goes to the last good run's release,
        # recorded as failed: the warning says why it goes there.
        (job.demo / FAIL_FLAG).unlink()
        job.write_src("crash", BAD_RELEASES["crashes"])
        time.sleep(1.1)  # another second: another release name
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "crash"))
        assert rc == 2, out
        (rolled,) = task_ends(events, ROLL_BACK)
        assert rolled["status"] == "changed", rolled
        assert f"; warning: release {good} was known to have failed: failed at " in rolled["msg"], rolled["msg"]
        (warning,) = [w for w in rolled.get("warnings", []) if "recorded as failed" in w]
        assert warning.startswith(f"release {good} was recorded as failed: failed at "), warning
        assert warning.endswith("; the rollback goes to it because it is the last good run's release (the run a "
                                "rollback puts back)"), warning
        assert _verdict(job, good)["state"] == "passed"
    finally:
        kill_marked(cleanup_marker)
