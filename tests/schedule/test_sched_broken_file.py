"""A schedule file edited by hand so that it no longer loads (`randomized_delay: soon`,
`notify_on: bogus`): its run, fired by the timer, is recorded as bad input (exit 4, with
file:line and the key) in the history the file names and alerted to the URLs it names;
`schedule list` and the dashboard list it with why, and every other schedule as usual."""

from __future__ import annotations

import re
from pathlib import Path

from tests.alerts import Alerts
from tests.helpers import ProjectEnv
from tests.web.dashboard import Project, serving


def _break(path: Path, key: str, value: str) -> None:
    """Edit the schedule file by hand: `key: value` replaced (or added at its end)."""
    text = path.read_text()
    line = f"{key}: {value}\n"
    text, n = re.subn(rf"^{key}:.*\n", line, text, flags=re.M)
    path.write_text(text if n else text + line)


def test_a_broken_schedule_run_is_recorded_in_its_history_and_alerted(env: ProjectEnv, alerts: Alerts) -> None:
    own = env.root / "own-history.db"
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily", "--history", str(own),
                    "--notify", alerts.url.replace("http://", "json://"), "--notify-on", "recovery")
    assert added.rc == 0, added.err
    path = env.root / "schedules" / "nightly.yml"
    _break(path, "randomized_delay", "soon")
    res = env.run("schedule", "run", "nightly")
    assert res.rc == 4, res.out + res.err
    assert re.search(r"nightly\.yml:\d+:\d+: randomized_delay must be int \(at randomized_delay\)", res.err), res.err
    assert not env.history_db.exists()  # recorded where the file says, not in $OPSRUNNER_HISTORY
    listing = env.run("history", "--json", "--history", str(own))
    import json

    [run] = json.loads(listing.out)
    assert run["schedule"] == "nightly" and run["exit_code"] == 4 and run["result"] == "bad input"
    assert "randomized_delay must be int" in run["reason"] and "nightly.yml:" in run["reason"]
    [alert] = alerts.received
    assert alert["title"] == "opsrunner: schedule nightly BAD INPUT (exit 4): site.yml"
    assert "randomized_delay must be int (at randomized_delay)" in alert["message"]
    assert f"run {run['id']}" in alert["message"]


def test_a_file_whose_history_cannot_be_read_records_in_the_default_one(env: ProjectEnv) -> None:
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily")
    assert added.rc == 0, added.err
    path = env.root / "schedules" / "nightly.yml"
    path.write_text("name: nightly\nproject: [unclosed\n")  # not even YAML
    res = env.run("schedule", "run", "nightly")
    assert res.rc == 4, res.err
    [run] = env.history()
    assert run["schedule"] == "nightly" and run["result"] == "bad input" and "nightly.yml" in run["reason"]


def test_list_shows_a_broken_schedule_with_why_and_every_other_as_usual(env: ProjectEnv) -> None:
    for name in ("alpha", "broken", "zulu"):
        added = env.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "daily")
        assert added.rc == 0, added.err
    _break(env.root / "schedules" / "broken.yml", "notify_on", "bogus")
    assert env.run("schedule", "run", "alpha").rc == 0
    assert env.run("schedule", "run", "broken").rc == 4
    res = env.run("schedule", "list")
    assert res.rc == 0, res.err
    rows = {line.split()[0]: line.split() for line in res.out.splitlines()[1:]}
    assert set(rows) == {"alpha", "broken", "zulu"}
    assert rows["alpha"][1] == "daily" and rows["alpha"][4] == "ok" and rows["zulu"][1:3] == ["daily", "-"]
    assert rows["broken"][1] == "INVALID" and rows["broken"][4:6] == ["bad", "input"]
    assert rows["broken"][-1] == "site.yml"
    assert re.search(r"WARNING: schedule broken: \S*broken\.yml:\d+:\d+: notify_on must be one of failure, "
                     r"recovery, always \(at notify_on\); its runs fail", res.err), res.err


def test_the_dashboard_lists_a_broken_schedule_with_why_and_the_others(tmp_path: Path) -> None:
    project = Project(tmp_path)
    for name in ("alpha", "broken"):
        added = project.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
        assert added.rc == 0, added.err
    _break(tmp_path / "schedules" / "broken.yml", "randomized_delay", "soon")
    with serving(project) as server:
        res = server.get("/api/schedules")
        assert res.status == 200, res.text
        found = {s["name"]: s for s in res.json()["schedules"]}
        page = server.get("/schedules")
    assert page.status == 200
    assert set(found) == {"alpha", "broken"}
    assert found["alpha"]["error"] is None and found["alpha"]["calendar"] == "daily"
    assert re.fullmatch(r"\S*broken\.yml:\d+:\d+: randomized_delay must be int \(at randomized_delay\)",
                        found["broken"]["error"])
    assert "invalid: " in page.text and "randomized_delay must be int (at randomized_delay)" in page.text
    assert page.text.count('class="schedule-error"') == 1


def test_a_cron_schedule_whose_file_is_no_longer_yaml_is_removed_with_its_line(env: ProjectEnv) -> None:
    crontab = env.root / "crontab"
    crontab.write_text("5 4 * * * /bin/true\n")
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
    assert added.rc == 0, added.err
    path = env.root / "schedules" / "nightly.yml"
    _break(path, "notify_on", "[unclosed")  # no YAML at all now
    assert "opsrunner-schedule:nightly" in crontab.read_text()
    res = env.run("schedule", "remove", "nightly")
    assert res.rc == 0, res.err
    assert re.search(r"the schedule file does not load \(.*nightly\.yml:\d+:\d+: YAML syntax error", res.out), res.out
    assert "removed the crontab entry of nightly" in res.out
    assert crontab.read_text() == "5 4 * * * /bin/true\n"
    assert not path.exists()


def test_a_timer_schedule_whose_file_does_not_load_is_removed_with_its_units(env: ProjectEnv) -> None:
    custom = env.root / "custom-units"
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily",
                    "--unit-dir", str(custom))
    assert added.rc == 0, added.err
    path = env.root / "schedules" / "nightly.yml"
    _break(path, "randomized_delay", "soon")
    res = env.run("schedule", "remove", "nightly")
    assert res.rc == 0, res.err
    assert "randomized_delay must be int" in res.out and "removing what it installed (systemd)" in res.out
    assert f"removed {custom}/opsrunner-nightly.timer" in res.out
    assert list(custom.iterdir()) == [] and not path.exists()


def test_a_schedule_whose_installer_line_is_broken_is_removed_both_ways(env: ProjectEnv) -> None:
    """The file no longer says how it was installed: a cron line left behind would run a
    schedule that no longer exists, so both are undone."""
    crontab = env.root / "crontab"
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
    assert added.rc == 0, added.err
    path = env.root / "schedules" / "nightly.yml"
    _break(path, "installer", "[cron")
    res = env.run("schedule", "remove", "nightly")
    assert res.rc == 0, res.err
    assert "removing what it installed (systemd or cron)" in res.out
    assert "removed the crontab entry of nightly" in res.out
    assert "opsrunner-schedule:nightly" not in crontab.read_text() and not path.exists()
