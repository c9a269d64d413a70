"""Schedules people already write: `--at` with a 5-field cron expression (croniter), as a
systemd timer (its OnCalendar translation: the same times as croniter's, checked against
systemd's own calculator) or a crontab line (as written); bad expressions are exit 4 with
the reason; OnCalendar expressions are judged by `systemd-analyze calendar` too."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from croniter import croniter

from opsrunner.schedule.cron import cron_to_calendar, parse_cron, systemd_verdict
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv, user_crontab
from tests.schedule.test_spec import BASES, SYSTEMD_ANALYZE, _systemd_next

CRONS = ["*/15 9-17 * * 1-5", "0 3 * * 0", "30 2 1,15 * *", "0 0 1 1,7 *", "5 */6 * * *", "0 12 * * 6,7",
         "59 23 * 2 *", "0 0 29 2 *"]


class Env(ProjectEnv):
    """A project with one trivial playbook and a local inventory."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        write_yaml(self.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
        write_yaml(self.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def _croniter_next(expr: str, base: str, n: int) -> list[dt.datetime]:
    it = croniter(expr, dt.datetime.strptime(base, "%Y-%m-%d %H:%M:%S"))
    return [it.get_next(dt.datetime) for _ in range(n)]


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)")
@pytest.mark.parametrize("expr", CRONS)
def test_a_cron_expression_as_a_timer_fires_when_cron_would(expr: str) -> None:
    calendar = cron_to_calendar(parse_cron(expr))
    assert systemd_verdict(calendar) is None
    for base in BASES:
        assert _systemd_next(calendar, base, 6) == _croniter_next(expr, base, 6), (expr, calendar, base)


def test_add_with_a_cron_expression_writes_a_timer_and_a_crontab_line(env: Env) -> None:
    user_crontab(env.root, env.vars)  # cron's line in a user's crontab: active, listed with its next run
    added = env.run("schedule", "add", "office", "site.yml", "-i", "inv.yml", "--at", "*/15 9-17 * * 1-5")
    assert added.rc == 0, added.err
    expected = croniter("*/15 9-17 * * 1-5", dt.datetime.now().replace(microsecond=0)).get_next(dt.datetime)
    match = re.match(r"schedule office: site\.yml at '\*/15 9-17 \* \* 1-5', written, not activated \(custom unit "
                     r"directory\): nothing runs it until its timer is enabled, then next run (\S+ \S+)\n", added.out)
    assert match and abs(dt.datetime.fromisoformat(match.group(1)) - expected) <= dt.timedelta(minutes=15), added.out
    timer = (env.root / "units" / "opsrunner-office.timer").read_text()
    assert "OnCalendar=Mon,Tue,Wed,Thu,Fri *-*-* 09,10,11,12,13,14,15,16,17:00,15,30,45:00\n" in timer
    assert "cron: '*/15 9-17 * * 1-5'\n" in (env.root / "schedules" / "office.yml").read_text()
    either = env.run("schedule", "add", "monthly", "site.yml", "-i", "inv.yml", "--at", "0 3 1 * 1", "--cron")
    assert either.rc == 0, either.err  # cron's own OR of day and weekday: fine for cron itself
    crontab = (env.root / "crontab").read_text()
    assert re.search(r"^0 3 1 \* 1 cd .* schedule run monthly .*# opsrunner-schedule:monthly$", crontab, re.M)
    listing = env.run("schedule", "list").out
    assert re.search(r"^monthly\s+0 3 1 \* 1\s+\d{4}-\d\d-\d\d 03:00:00\s", listing, re.M), listing
    assert env.run("schedule", "run", "office").rc == 0
    assert json.loads(env.run("history", "--json").out)[0]["schedule"] == "office"


@pytest.mark.parametrize(("spec", "why"), [
    ("61 * * * *", "<--at>: bad cron expression '61 * * * *': "),
    ("0 3 1 * 1", "restricts both the day of month and the weekday, which cron ORs and a systemd timer would AND"),
    ("* * * * * *", "cannot read"),
])
def test_a_cron_expression_that_cannot_be_used_is_exit_4(env: Env, spec: str, why: str) -> None:
    res = env.run("schedule", "add", "bad", "site.yml", "-i", "inv.yml", "--at", spec)
    assert res.rc == 4 and why in res.err and "(at --at)" in res.err, res.err
    assert not (env.root / "schedules").exists()


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)")
def test_systemd_analyze_judges_calendar_expressions() -> None:
    assert systemd_verdict("Mon..Fri 08:30") is None
    assert systemd_verdict("Sun 25:00") == "Failed to parse calendar specification 'Sun 25:00': Invalid argument"
