"""`opsrunner schedule` end to end. Units go to a tmp unit directory ($OPSRUNNER_UNIT_DIR),
cron entries to a tmp file ($OPSRUNNER_CRONTAB): nothing reaches the machine's systemd or
crontab. Alerts go to an HTTP server the test runs on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.alerts import Alerts
from tests.conftest import ROOT, write_yaml
from tests.helpers import ProjectEnv

PLAYBOOK = [{"name": "Nightly", "hosts": "all", "tasks": [
    {"name": "Version", "debug": {"msg": "procedure {{ version | default('v1') }}"}},
    {"name": "Maybe fail", "fail": {"msg": "broken with {{ api_token | default('-') }}"},
     "when": "fail_it | default(false) | bool"},
]}]


class Env(ProjectEnv):
    """The schedule tests' project (tests/helpers.py)."""


def hook(alerts: Alerts) -> str:
    """How notes name the receiver: the plain http URL given to --notify, its path masked."""
    return alerts.shown


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    write_yaml(e.project / "site.yml", PLAYBOOK)
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    return e


def test_add_writes_reviewable_file_and_units(env: Env) -> None:
    res = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "-e", "version=v1", "--at", "Sun 03:00",
                  "--notify", "http://127.0.0.1:9/hook", "--randomized-delay", "120")
    assert res.rc == 0, res.err
    assert res.out.startswith("schedule nightly: site.yml at 'Sun 03:00', written, not activated (custom unit "
                              "directory): nothing runs it until its timer is enabled, then next run ")
    units = env.root / "units"
    assert f"wrote {units}/opsrunner-nightly.timer (not activated: custom unit directory)" in res.out
    schedule_file = env.root / "schedules" / "nightly.yml"
    assert (schedule_file.read_text().split("\n", 2)[2] ==
            f"name: nightly\nproject: {env.project}\nplaybook: site.yml\non_calendar: Sun 03:00\n"
            "inventory:\n- inv.yml\nextra_vars:\n- version=v1\ngit_pull: false\nnotify:\n- http://127.0.0.1:9/hook\n"
            f"notify_on: failure\nrandomized_delay: 120\ninstaller: systemd\nhistory: {env.history_db}\n")
    service = (units / "opsrunner-nightly.service").read_text()
    user = "" if os.geteuid() else "User=root\n"
    assert service.split("\n", 1)[1] == (
        "[Unit]\nDescription=opsrunner schedule nightly (site.yml)\nWants=network-online.target\n"
        "After=network-online.target\n\n[Service]\nType=oneshot\nKillMode=process\n"
        f"WorkingDirectory={env.project}\n"
        f"ExecStart={sys.executable} -P -m opsrunner schedule run nightly --schedules {env.root / 'schedules'}\n{user}")
    timer = (units / "opsrunner-nightly.timer").read_text()
    assert timer.split("\n", 1)[1] == (
        "[Unit]\nDescription=Timer of opsrunner schedule nightly\n\n[Timer]\nOnCalendar=Sun 03:00\n"
        "Persistent=true\nRandomizedDelaySec=120\nUnit=opsrunner-nightly.service\n\n[Install]\n"
        "WantedBy=timers.target\n")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (apt-get install systemd); the golden unit test runs")
@pytest.mark.parametrize("when", [["--at", "Mon..Fri 08:30"], ["--every", "6h"], ["--at", "daily"]])
def test_units_pass_systemd_analyze_verify(env: Env, when: list[str]) -> None:
    (env.project / "with space").mkdir()
    shutil.copy(env.project / "site.yml", env.project / "with space" / "site.yml")
    shutil.copy(env.project / "inv.yml", env.project / "with space" / "inv.yml")
    res = env.run("schedule", "add", "job-1", "site.yml", "-i", "inv.yml", *when, cwd=env.project / "with space")
    assert res.rc == 0, res.err
    units = sorted(str(p) for p in (env.root / "units").iterdir())
    mode = ["--user"] if os.geteuid() else []
    proc = subprocess.run(["systemd-analyze", "verify", *mode, *units], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "opsrunner-job-1" not in proc.stdout + proc.stderr  # no warning about our units at all


def test_add_refuses_a_broken_playbook_and_installs_nothing(env: Env) -> None:
    write_yaml(env.project / "bad.yml", [{"hosts": "all", "tasks": [{"debug": {"mgs": "typo"}}]}])
    res = env.run("schedule", "add", "bad", "bad.yml", "-i", "inv.yml", "--at", "daily")
    assert res.rc == 4
    assert "ERROR: bad.yml:4:7: unknown key 'mgs' (did you mean 'msg'?) (at [0].tasks[0].debug.mgs)" in res.err
    assert "schedule 'bad' not added" in res.err
    assert not (env.root / "schedules").exists() and not (env.root / "units").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--at", "Sun 25:00"], "ERROR: <--at>: hour '25' out of range 0..23 in 'Sun 25:00' (at --at)"),
    (["--every", "7h"], "ERROR: <--every>: --every 7h: the interval must divide an hour"),
    (["--at", "Mon *-*-1 03:00", "--cron"], "restricts both the weekday and the day of month"),
])
def test_bad_spec_is_exit_4_before_anything(env: Env, args: list[str], message: str) -> None:
    res = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", *args)
    assert res.rc == 4, res.err
    assert message in res.err
    assert not (env.root / "schedules").exists()


def test_bad_name_and_duplicate(env: Env) -> None:
    assert env.run("schedule", "add", "../evil", "site.yml", "--at", "daily").rc == 5
    assert env.run("schedule", "add", "dup", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    again = env.run("schedule", "add", "dup", "site.yml", "-i", "inv.yml", "--at", "daily")
    assert again.rc == 5 and "schedule 'dup' already exists" in again.err


def test_cron_entry_written_and_removed(env: Env) -> None:
    crontab = env.root / "crontab"
    crontab.write_text("# someone else's line\n5 4 * * * /bin/true\n")
    res = env.run("schedule", "add", "hourly-check", "site.yml", "-i", "inv.yml", "--every", "15m", "--cron")
    assert res.rc == 0, res.err
    lines = crontab.read_text().splitlines()
    assert lines[:2] == ["# someone else's line", "5 4 * * * /bin/true"]
    assert lines[2] == (f"0,15,30,45 * * * * cd {env.project} && {sys.executable} -P -m opsrunner schedule run "
                        f"hourly-check --schedules {env.root / 'schedules'} # opsrunner-schedule:hourly-check")
    assert not (env.root / "units").exists()
    rm = env.run("schedule", "remove", "hourly-check")
    assert rm.rc == 0 and "removed the crontab entry of hourly-check" in rm.out
    assert crontab.read_text().splitlines() == ["# someone else's line", "5 4 * * * /bin/true"]
    assert not (env.root / "schedules" / "hourly-check.yml").exists()


def test_remove_deletes_units_and_file(env: Env) -> None:
    assert env.run("schedule", "add", "gone", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    res = env.run("schedule", "remove", "gone")
    assert res.rc == 0, res.err
    assert list((env.root / "units").iterdir()) == []
    assert res.out.splitlines()[-1] == "schedule gone removed"
    missing = env.run("schedule", "remove", "gone")
    assert missing.rc == 5 and "no schedule named 'gone'" in missing.err


def test_remove_finds_the_units_where_add_put_them(env: Env) -> None:
    """Units written with --unit-dir are removed from there by a plain `schedule remove`."""
    custom = env.root / "custom-units"
    assert env.run("schedule", "add", "aside", "site.yml", "-i", "inv.yml", "--at", "daily",
                   "--unit-dir", str(custom)).rc == 0
    assert sorted(p.name for p in custom.iterdir()) == ["opsrunner-aside.service", "opsrunner-aside.timer"]
    res = env.run("schedule", "remove", "aside")
    assert res.rc == 0, res.err
    assert list(custom.iterdir()) == [] and f"removed {custom}/opsrunner-aside.timer" in res.out


def test_run_records_history_lists_last_run_and_alerts_on_failure(env: Env, alerts: Alerts) -> None:
    assert env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "-e", "fail_it=yes api_token=t0k3n",
                   "--at", "Sun 03:00", "--notify", alerts.url).rc == 0
    res = env.run("schedule", "run", "nightly", cwd=env.root)
    assert res.rc == 2, res.out + res.err
    # the console shows what the play printed, with the secret-named variable's value masked
    assert "PLAY RECAP" in res.out and "broken with ********" in res.out and "t0k3n" not in res.out
    [run] = env.history()
    assert run["schedule"] == "nightly" and run["exit_code"] == 2
    # the command a person can paste to run the same again (secrets masked)
    assert run["command"] == "opsrunner play site.yml -i inv.yml -e 'fail_it=yes api_token=********' --lock"
    assert run["notes"] == [f"alert to {hook(alerts)}: sent"]
    [alert] = alerts.received  # apprise's json:// payload: a plain http URL is posted as JSON
    assert alert["type"] == "failure" and alert["title"] == "opsrunner: schedule nightly FAILED (exit 2): site.yml"
    assert alert["message"].startswith(alert["title"] + " on ")
    assert "\n- [node1] Maybe fail: broken with ********\n" in alert["message"]
    assert alert["message"].endswith(f"run {run['id']}: opsrunner show {run['id']}")
    assert "t0k3n" not in json.dumps(alert)
    listing = env.run("schedule", "list").out.splitlines()
    assert listing[0].split() == ["NAME", "SPEC", "NEXT", "RUN", "LAST", "RUN", "RESULT", "PLAYBOOK"]
    assert listing[1].startswith("nightly  Sun 03:00  ") and f"failed ({run['id']})" in listing[1]


def test_success_sends_nothing_unless_always(env: Env, alerts: Alerts) -> None:
    assert env.run("schedule", "add", "quiet", "site.yml", "-i", "inv.yml", "--at", "daily",
                   "--notify", alerts.url).rc == 0
    assert env.run("schedule", "run", "quiet").rc == 0
    assert alerts.received == []
    assert env.run("schedule", "add", "loud", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url,
                   "--notify-on", "always").rc == 0
    assert env.run("schedule", "run", "loud").rc == 0
    [alert] = alerts.received
    assert alert["title"] == "opsrunner: schedule loud OK (exit 0): site.yml" and alert["type"] == "success"


def test_alert_is_retried_and_a_failed_alert_is_recorded_not_fatal(env: Env, alerts: Alerts) -> None:
    assert env.run("schedule", "add", "flaky", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url,
                   "--notify-on", "always").rc == 0
    alerts.codes = [500, 503]
    assert env.run("schedule", "run", "flaky").rc == 0
    assert len(alerts.received) == 3  # two refusals, then delivered
    assert env.history()[0]["notes"] == [f"alert to {hook(alerts)}: sent"]
    alerts.codes = [500, 500, 500]
    res = env.run("schedule", "run", "flaky")
    assert res.rc == 0  # the play's code, not the alert's
    note = (f"alert to {hook(alerts)}: FAILED: Failed to send JSON POST notification: Internal server error., "
            "error=500. (after 3 attempts)")
    assert f"WARNING: {note}" in res.err
    assert env.history()[0]["notes"] == [note]


def test_git_pull_fast_forwards_and_refuses_dirty_or_diverged(env: Env, alerts: Alerts, tmp_path: Path) -> None:
    upstream, work = tmp_path / "upstream.git", tmp_path / "work"
    git(env.project, "init", "-q", "-b", "main")
    git(env.project, "add", "-A")
    git(env.project, "commit", "-qm", "v1")
    subprocess.run(["git", "clone", "-q", "--bare", str(env.project), str(upstream)], check=True)
    git(env.project, "remote", "add", "origin", str(upstream))
    git(env.project, "fetch", "-q", "origin")
    git(env.project, "branch", "-q", "--set-upstream-to=origin/main")
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True)
    assert env.run("schedule", "add", "pull", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull",
                   "--notify", alerts.url).rc == 0
    (work / "site.yml").write_text((work / "site.yml").read_text().replace("default('v1')", "default('v2')"))
    git(work, "commit", "-qam", "v2")
    git(work, "push", "-q", "origin", "HEAD:main")
    res = env.run("schedule", "run", "pull")
    assert res.rc == 0, res.out + res.err
    assert "procedure v2" in res.out
    assert env.history()[0]["git_commit"] == git(work, "rev-parse", "HEAD")
    (env.project / "site.yml").write_text((env.project / "site.yml").read_text() + "\n# local edit\n")
    dirty = env.run("schedule", "run", "pull")
    assert dirty.rc == 2 and f"refusing to run: {env.project} has uncommitted changes (site.yml)" in dirty.err
    assert "has uncommitted changes" in alerts.received[-1]["message"]
    git(env.project, "commit", "-qam", "local commit")
    (work / "inv.yml").write_text((work / "inv.yml").read_text() + "\n# upstream edit\n")
    git(work, "commit", "-qam", "v3")
    git(work, "push", "-q", "origin", "HEAD:main")
    diverged = env.run("schedule", "run", "pull")
    assert diverged.rc == 2 and "git pull --ff-only failed" in diverged.err
    runs = env.history()  # newest first: both refused runs are recorded, neither touched a host
    assert [(r["schedule"], r["exit_code"], r["label"]) for r in runs] == [
        ("pull", 2, "refused (exit 2)"), ("pull", 2, "refused (exit 2)"), ("pull", 0, "ok")]
    assert "git pull --ff-only failed" in runs[0]["reason"] and "uncommitted changes" in runs[1]["reason"]
    assert runs[0]["tasks"] == [] and runs[1]["tasks"] == [] and runs[0]["recap"] == {}


def test_scheduled_run_takes_the_run_lock(env: Env, alerts: Alerts) -> None:
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [{"pause": {"seconds": 6}}]}])
    assert env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily",
                   "--notify", alerts.url).rc == 0
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env.vars)
    manual = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                              cwd=env.project, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        locks = env.root / "state" / "opsrunner" / "locks"
        from tests.conftest import wait_for

        assert wait_for(lambda: any(f.read_text() for f in locks.glob("*.lock")), 30)
        res = env.run("schedule", "run", "slow")
    finally:
        manual.communicate(timeout=60)
    assert res.rc == 2, res.err
    assert f"(opsrunner pid {manual.pid}, playbook slow.yml" in res.err
    assert "locked by " in alerts.received[-1]["message"]
    (refused,) = [r for r in env.history() if r["schedule"] == "slow"]  # recorded, and its id printed
    assert res.out == f"run {refused['id']} (opsrunner show {refused['id']})\n", res.out
    assert manual.returncode == 0


def test_malformed_schedule_file_is_exit_4_with_file_line_and_key(env: Env) -> None:
    assert env.run("schedule", "add", "edited", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    path = env.root / "schedules" / "edited.yml"
    path.write_text(path.read_text().replace("on_calendar: daily", "on_calendar: Sun 25:00"))
    res = env.run("schedule", "run", "edited")
    assert res.rc == 4
    assert f"ERROR: {path}:6:1: hour '25' out of range 0..23 in 'Sun 25:00' (at on_calendar)" in res.err
    path.write_text(path.read_text().replace("git_pull: false", "git_pul: false"))
    res = env.run("schedule", "list")  # listed with why, and every other schedule as usual
    assert res.rc == 0 and "unknown key 'git_pul'" in res.err and "(at git_pul)" in res.err
    assert "edited" in res.out and "INVALID" in res.out
    (run,) = env.history()  # the failed `schedule run` above is recorded, with its reason
    assert run["result"] == "bad input" and run["exit_code"] == 4 and "out of range" in run["reason"], run


def test_negative_randomized_delay_is_exit_4(env: Env) -> None:
    res = env.run("schedule", "add", "x", "site.yml", "--at", "daily", "--randomized-delay", "-5")
    assert res.rc == 4
    assert "ERROR: <--randomized-delay>: must be 0 or more seconds (at --randomized-delay)" in res.err
