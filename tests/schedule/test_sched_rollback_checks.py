"""A rollback verifies the run it relaunched against what that run was launched with: its
log is the one its good run wrote (never a failed redeploy's new log_path), its other checks
the ones that passed when it was recorded good (not a failed redeploy's new ready_regex).
The automatic rollback of a scheduled restart, a hand rollback, and a hand rollback's undo
(what ran before, started again) each say `verified`, in the line, the history and the alert."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.alerts import Alerts
from tests.conftest import ROOT, write_yaml
from tests.helpers import ProjectEnv
from tests.schedule.restart_project import alive, pidfile_pid, stop
from tests.schedule.test_sched_alert_failed_changes import _a_good_run_first, _failed_run, _script

BLOCK = "what the run changed before it failed (the hosts are left so):"
ROLL_BACK = "Roll back to the last good run"
FAIL = "Fail the restart (what failed, and the rollback)"
PLAIN = "the last good run's launch (no release: the code deployed in place stays)"
NOPE = "/proc/nope/train.log"


def _rollback_line(message: str) -> str:
    """The rollback's line in the alert's block of what the run changed."""
    block = message.splitlines()
    [line] = [ln for ln in block[block.index(BLOCK):] if ln.startswith(f"  changed: {ROLL_BACK}: ")]
    return line.split(": ", 2)[2]


def _last_run(env: ProjectEnv) -> dict[str, Any]:
    run = env.history()[0]
    return dict(run)


def _assert_rolled_back(env: ProjectEnv, message: str, good: str, note: str) -> int:
    """The scheduled restart failed (exit 2, the failed task rescued), and its rollback put the
    good run back and verified it, saying with what (`note`), in the history and the alert
    (whose line may cut the note's middle, never `verified`)."""
    pid = pidfile_pid(env)
    assert pid is not None and alive(pid, good), message
    said = f"rolled back to {PLAIN}, pid {pid}, verified{note}"
    assert _rollback_line(message).startswith(f"rolled back to {PLAIN}, pid {pid}, verified with "), message
    [failed] = [ln for ln in message.splitlines() if ln.startswith(f"- [box] {FAIL}: ")]
    assert failed.endswith(f"; {said}"), message  # the failure's line, whole
    assert "failed too" not in message and "not verified" not in message, message
    run = _last_run(env)
    assert run["exit_code"] == 2
    assert run["recap"]["box"]["rescued"] == 1 and run["recap"]["box"]["failed"] == 1, run["recap"]
    rows = {t["task"]: t for t in run["tasks"]}
    assert rows[ROLL_BACK]["status"] == "changed", rows[ROLL_BACK]
    assert rows[ROLL_BACK]["msg"].split("\n")[0].endswith(f"; {said}"), rows[ROLL_BACK]
    assert rows[FAIL]["msg"].endswith(f"; {said}"), rows[FAIL]
    return pid


def _redeploy_that_fails_at_once(env: ProjectEnv, body: str) -> Path:
    """The next restart logs to a new log_path and launches a job (`body`, given that log's
    path as {log}) that exits 3 at once, after the old run was stopped; the new log_path."""
    elsewhere = env.root / "demo" / "elsewhere" / "train.log"
    write_yaml(env.project / "group_vars" / "all.yml", {
        "log_path": str(elsewhere), "verify_within": 5,
        "train_command": _script(env, "fails.sh", body.format(log=elsewhere))})
    return elsewhere


def test_a_redeploy_with_a_log_path_that_cannot_be_made_leaves_the_good_run_running(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    """Found before the old run is stopped: nothing is stopped, so nothing is rolled back."""
    with _a_good_run_first(env, old_job) as good:
        before = pidfile_pid(env)
        write_yaml(env.project / "group_vars" / "all.yml", {"log_path": NOPE, "verify_within": 5})
        message = _failed_run(env, alerts, "restart_training.yml")
        assert before is not None and pidfile_pid(env) == before and alive(before, good), message
        [failed] = [ln for ln in message.splitlines() if ln.startswith(f"- [box] {FAIL}: ")]
        assert (f"failed: cannot open the log {NOPE}: directory /proc (to create /proc/nope) is on the kernel's "
                "/proc file system, where no file or folder can be made; the new run could not start, so the old "
                f"run (pid {before}) was left running; no rollback needed: ") in failed, message
        assert "killed" not in message and "rolled back to" not in message, message


def test_a_failed_redeploy_with_a_new_log_path_is_rolled_back_and_verified_with_its_good_runs_log(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job) as good:
        log = env.root / "demo" / "train.log"
        recorded = json.loads((env.root / "demo" / "train.good.json").read_text())
        _redeploy_that_fails_at_once(env, "echo failing; exit 3")
        message = _failed_run(env, alerts, "restart_training.yml")
        assert "exited at once with code 3" in message, message
        pid = _assert_rolled_back(env, message, good, f" with the checks of its good run (log {log})")
        again = json.loads((env.root / "demo" / "train.good.json").read_text())
        assert again["pid"] == pid and again["log"] == str(log), again
        assert again["checks"] == recorded["checks"] and recorded["checks"]["log"] == str(log), recorded
        # The checks keep the record small: the role's are a few hundred bytes.
        kept = len(json.dumps(recorded["checks"]))
        print(f"\ngood.json {(env.root / 'demo' / 'train.good.json').stat().st_size} bytes, its checks {kept}")
        assert kept < 200 + len(str(log)), recorded["checks"]


def test_a_redeploy_with_a_new_ready_regex_is_rolled_back_and_verified_with_its_good_runs_regex(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job, ready_regex="^up$") as good:
        write_yaml(env.project / "group_vars" / "all.yml", {"ready_regex": "ready: never", "verify_within": 2})
        message = _failed_run(env, alerts, "restart_training.yml")
        # the regex by its key alone: a text check may hold an old secret the run no longer masks
        _assert_rolled_back(env, message, good, " with the checks of its good run (log_regex)")


def test_a_record_from_before_checks_were_kept_is_verified_with_the_given_checks(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    """A good run recorded before its checks were kept: the rollback has nothing to tell its
    own checks by, and verifies it with the given ones, as before (its launch's log is not
    always the log verify reads: taking it failed healthy runs). With the redeploy's wrong
    log_path that verify fails (its job removed that log before it failed), and the line says the
    relaunched run still runs."""
    with _a_good_run_first(env, old_job) as good:
        path = env.root / "demo" / "train.good.json"
        older = json.loads(path.read_text())
        older.pop("checks", None)
        path.write_text(json.dumps(older))
        elsewhere = _redeploy_that_fails_at_once(env, "rm -f {log}; exit 3")
        message = _failed_run(env, alerts, "restart_training.yml")
        pid = pidfile_pid(env)
        assert pid is not None and alive(pid, good), message
        [line] = [ln for ln in message.splitlines() if ln.startswith(f"- [box] {ROLL_BACK}: ")]
        assert f"failed too: the relaunched run failed verify: no log at {elsewhere}" in line, message
        assert line.endswith(f"; pid {pid} still runs from it, not verified"), message
        assert "verified with" not in message, message


def _hand_rollback(env: ProjectEnv, code: int) -> str:
    """playbooks/rollback.yml by hand, with a log_path that no run writes; its rollback line."""
    if not (env.project / "rollback.yml").exists():
        shutil.copy(ROOT / "playbooks" / "rollback.yml", env.project)
    res = env.run("play", "rollback.yml", "-i", "inv.yml", "-e", f"log_path={NOPE}", "-e", "verify_within=5")
    assert res.rc == code, res.out + res.err
    [line] = [ln for ln in (res.out + res.err).splitlines() if "rolled back to" in ln or "rollback to" in ln]
    return line


def test_a_hand_rollback_verifies_the_relaunched_run_with_its_good_runs_log(
        env: ProjectEnv, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job) as good:
        before = pidfile_pid(env)
        line = _hand_rollback(env, 0)
        pid = pidfile_pid(env)
        assert pid is not None and pid != before and alive(pid, good), line
        log = env.root / "demo" / "train.log"
        assert line.endswith(f"rolled back to {PLAIN}, pid {pid}, verified with the checks of its good run "
                             f"(log {log})"), line
        assert env.history()[0]["exit_code"] == 0


def test_what_ran_before_a_failed_hand_rollback_is_verified_with_its_own_log(
        env: ProjectEnv, old_job: tuple[int, str]) -> None:
    flag = env.root / "demo" / "fail-next-start"
    with _a_good_run_first(env, old_job) as good:
        # The good run's launch fails once more (the rollback's relaunch), then starts again.
        _script(env, "good.sh", f"if [ -e {flag} ]; then rm -f {flag}; echo failing; exit 3; fi\n"
                                f"echo up; exec sleep {good}")
        flag.write_text("")
        line = _hand_rollback(env, 2)
        pid = pidfile_pid(env)
        assert pid is not None and alive(pid, good), line
        log = env.root / "demo" / "train.log"
        assert f"rollback to {PLAIN} failed: the relaunched " in line and "code 3" in line, line
        assert line.endswith(f"; what ran before is running again: {PLAIN}, pid {pid}, verified with the checks "
                             f"of its good run (log {log})"), line
        assert not flag.exists()
        assert json.loads(Path(env.root / "demo" / "train.good.json").read_text())["pid"] == pid


def test_what_ran_before_a_failed_hand_rollback_is_said_to_run_when_its_log_is_missing(
        env: ProjectEnv, old_job: tuple[int, str]) -> None:
    """What ran before, started again, fails its verify because the log it was verified with
    is gone (rotated away): it still runs, and the line says so (not `nothing is running`)."""
    demo, marker = env.root / "demo", old_job[1] + "1"
    flag, app_log = demo / "fail-next-start", demo / "app.log"
    job = _script(env, "job.sh", f"if [ -e {flag} ]; then rm -f {flag}; exit 3; fi\nexec sleep {marker}")
    app_log.write_text("up\n")
    pidfile = str(demo / "train.pid")
    write_yaml(env.project / "rb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"launch_detached": {"command": job, "pidfile": pidfile}, "when": "not (back | default(false) | bool)"},
        {"verify": {"pidfile": pidfile, "processes": 1, "log": str(app_log), "record_good": True},
         "when": "not (back | default(false) | bool)"},
        {"rollback": {"pidfile": pidfile, "verify": {"processes": 1, "within": 1}},
         "when": "back | default(false) | bool"}]}])
    pid = None
    try:
        first = env.run("play", "rb.yml", "-i", "inv.yml")
        assert first.rc == 0, first.out + first.err
        app_log.unlink()
        flag.write_text("")
        res = env.run("play", "rb.yml", "-i", "inv.yml", "-e", "back=true")
        assert res.rc == 2, res.out + res.err
        pid = pidfile_pid(env)
        assert pid is not None and alive(pid, marker), res.out
        [line] = [ln for ln in res.out.splitlines() if "rollback to " in ln]
        assert (f"but failed verify too with the checks of its good run (log {app_log}): no log at {app_log}: "
                f"the job (pid {pid}) is running") in line, line
        assert f"; pid {pid} still runs, not verified" in line and "nothing is running" not in line, line
    finally:
        stop(pid or pidfile_pid(env), marker)
