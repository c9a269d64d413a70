"""`--every`: minutes that divide an hour (1m..60m), whole hours that divide a day (1h..24h)
or 1d, as the docs say; 60m is hourly and 24h daily. Each becomes an OnCalendar expression
systemd takes (checked by systemd-analyze at add where it is installed) and the crontab
fields of the same times; anything else is exit 4 naming --every, with nothing written."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.helpers import ProjectEnv


@pytest.mark.parametrize(("every", "calendar", "cron"), [
    ("1m", "*-*-* *:*:00", "* * * * *"),
    ("30m", "*-*-* *:00/30:00", "0,30 * * * *"),
    ("60m", "*-*-* *:00:00", "0 * * * *"),
    ("1h", "*-*-* *:00:00", "0 * * * *"),
    ("120m", "*-*-* 00/2:00:00", "0 0,2,4,6,8,10,12,14,16,18,20,22 * * *"),
    ("12h", "*-*-* 00/12:00:00", "0 0,12 * * *"),
    ("24h", "*-*-* 00:00:00", "0 0 * * *"),
    ("1d", "*-*-* 00:00:00", "0 0 * * *"),
])
def test_every_interval_that_divides_an_hour_or_a_day_is_installed(env: ProjectEnv, every: str, calendar: str,
                                                                   cron: str) -> None:
    timer = env.run("schedule", "add", "t", "site.yml", "-i", "inv.yml", "--every", every)
    assert timer.rc == 0, timer.err
    assert re.search(r"next run \d{4}-\d\d-\d\d \d\d:\d\d:00\n", timer.out), timer.out
    unit = (env.root / "units" / "opsrunner-t.timer").read_text()
    assert f"\nOnCalendar={calendar}\n" in unit
    if shutil.which("systemd-analyze"):
        proc = subprocess.run(["systemd-analyze", "calendar", calendar], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    line = env.run("schedule", "add", "c", "site.yml", "-i", "inv.yml", "--every", every, "--cron")
    assert line.rc == 0, line.err
    assert (env.root / "crontab").read_text().startswith(f"{cron} cd ")
    listing = env.run("schedule", "list")
    assert listing.rc == 0 and f"--every {every}" in listing.out


@pytest.mark.parametrize("every", ["90m", "45m", "7h", "5h", "48h", "2d", "0m", "0h", "soon"])
def test_other_intervals_are_exit_4_naming_every_and_nothing_is_written(env: ProjectEnv, every: str) -> None:
    for extra in ([], ["--cron"]):
        res = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--every", every, *extra)
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: <--every>: --every {every}" in res.err.replace(f"'{every}'", every), res.err
        assert "(at --every)" in res.err and "Traceback" not in res.err
        assert not any((env.root / p).exists() for p in ("schedules", "units", "crontab"))
