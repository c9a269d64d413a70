"""What a scheduled restart's alert says of its rollback: a long rollback line (one that
removed `current`) is bounded by cutting its reason, never what it did; a rollback refused
before it touched anything leaves the failed launch's note (`no rollback ran`) in place."""

from __future__ import annotations

from tests.alerts import Alerts
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv
from tests.schedule.restart_project import alive, pidfile_pid
from tests.schedule.test_sched_alert_failed_changes import _a_good_run_first, _dies, _failed_run

BLOCK = "what the run changed before it failed (the hosts are left so):"


def _block(message: str) -> list[str]:
    lines = message.splitlines()
    return lines[lines.index(BLOCK):]


def test_a_rollback_that_removed_current_is_alerted_with_its_outcome_whole(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    with _a_good_run_first(env, old_job) as good:  # a plain deploy's last good run
        code = env.root / "demo" / "code"
        write_yaml(env.project / "group_vars" / "all.yml", {"train_command": _dies(env), "releases": True,
                                                             "train_chdir": f"{code}/current"})
        message = _failed_run(env, alerts, "restart_training.yml")
        pid = pidfile_pid(env)
        assert pid is not None and alive(pid, good)
        [line] = [ln for ln in _block(message) if ln.startswith("  changed: Roll back to the last good run: ")]
        said = line.split(": ", 2)[2]
        assert said.startswith("rolled back to the last good run's launch (no release: the code deployed in "
                               f"place stays), pid {pid}, verified; current removed ({code}/current pointed to "
                               "release "), line
        assert said.endswith(", which is not what runs)") and " ... " not in said, line
        assert not (code / "current").exists()


def test_a_rollback_refused_before_it_acted_leaves_the_no_rollback_note(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    code = env.root / "demo" / "code"
    # the last good run: a release
    with _a_good_run_first(env, old_job, releases=True, train_chdir=f"{code}/current"):
        good_release = (code / "current").resolve()
        (good_release / "train.py").write_text("print('edited in place')\n")  # a rollback refuses it now
        write_yaml(env.root / "demo" / "src" / "train.py", "print('next')\n")
        write_yaml(env.project / "group_vars" / "all.yml", {"train_command": _dies(env)})
        message = _failed_run(env, alerts, "restart_training.yml")
        block = _block(message)
        [rollback] = [ln for ln in block if ln.startswith("  rollback FAILED: ")]
        # Its reason is kept from its start (how much of it fits depends on the temp dir's path
        # the reason names; before the fix it was cut to "failed too: th ...").
        reason = f"rollback failed too: refusing to roll back to release {good_release.name}: "
        assert reason in rollback, message
        [note] = [ln for ln in block if "LAUNCHED" in ln]
        assert note.startswith("  LAUNCHED, FAILED VERIFY: what 'Launch the new run detached "), message
        assert f"; no rollback ran ({reason}" in note, message
