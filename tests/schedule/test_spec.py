"""Calendar expressions: next runs checked against systemd's own calculator where it is
installed, golden values everywhere, --every, cron lines, and clear errors."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess

import pytest

from opsrunner.schedule.spec import SpecError, every_to_calendar, parse_calendar, to_cron

EXPRESSIONS = ["daily", "hourly", "weekly", "monthly", "quarterly", "semiannually", "yearly", "Sun 03:00",
               "*-*-* 04:00:00", "Mon..Fri 08:30", "Sat,Sun *-*-1..7 12:00", "*:0/15", "*-*-* 00/6:00:00",
               "2027-*-* 1,13:00", "*-1..3-* 10:00", "*-02-29 00:00", "Mon *-*-* 23:59:30", "*-*-15 12:00",
               "monday 03:00", "*-*-* 09..17/2:05"]
BASES = ["2026-12-01 01:40:00", "2027-02-27 23:59:59", "2028-12-31 23:00:00"]
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _systemd_next(expr: str, base: str, n: int) -> list[dt.datetime]:
    proc = subprocess.run([SYSTEMD_ANALYZE or "systemd-analyze", "calendar", f"--base-time={base}",
                           f"--iterations={n}", expr], capture_output=True, text=True, env=dict(os.environ, TZ="UTC"),
                          check=True)
    found = []
    for line in proc.stdout.splitlines():
        key, _, value = line.strip().partition(": ")
        if (key == "Next elapse" or key.startswith("Iter. #")) and value != "never":
            found.append(dt.datetime.strptime(value.rsplit(" ", 1)[0].split(" ", 1)[1], "%Y-%m-%d %H:%M:%S"))
    return found


def _ours(expr: str, base: str, n: int) -> list[dt.datetime]:
    spec = parse_calendar(expr)
    out: list[dt.datetime] = []
    current = dt.datetime.strptime(base, "%Y-%m-%d %H:%M:%S")
    for _ in range(n):
        nxt = spec.next_run(current)
        if nxt is None:
            break
        out.append(nxt)
        current = nxt
    return out


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd); "
                    "the golden tests below still run")
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_next_runs_match_systemd(expr: str) -> None:
    for base in BASES:
        expected = _systemd_next(expr, base, 6)
        assert len(expected) == 6 or (expr.startswith("2027") and base.startswith("2028") and not expected)
        assert _ours(expr, base, 6) == expected, (expr, base)


@pytest.mark.parametrize(("expr", "base", "first"), [
    ("daily", "2026-12-01 01:40:00", "2026-12-02 00:00:00"),
    ("Sun 03:00", "2026-12-01 01:40:00", "2026-12-06 03:00:00"),
    ("Sun 03:00", "2026-12-06 03:00:00", "2026-12-13 03:00:00"),  # strictly after
    ("*-02-29 00:00", "2026-12-01 00:00:00", "2028-02-29 00:00:00"),
    ("*:0/15", "2026-12-01 01:40:00", "2026-12-01 01:45:00"),
    ("*-*-31 12:00", "2027-04-01 00:00:00", "2027-05-31 12:00:00"),
])
def test_golden_next_run(expr: str, base: str, first: str) -> None:
    assert _ours(expr, base, 1)[0] == dt.datetime.strptime(first, "%Y-%m-%d %H:%M:%S")


@pytest.mark.parametrize(("every", "calendar"), [
    ("15m", "*-*-* *:00/15:00"), ("1m", "*-*-* *:*:00"), ("6h", "*-*-* 00/6:00:00"), ("1h", "*-*-* *:00:00"),
    ("1d", "*-*-* 00:00:00"), ("30 minutes", "*-*-* *:00/30:00"),
])
def test_every_becomes_a_calendar(every: str, calendar: str) -> None:
    assert every_to_calendar(every) == calendar


@pytest.mark.parametrize(("every", "message"), [
    ("7h", "--every 7h: the interval must divide an hour (minutes) or a day (hours), or be 1d"),
    ("2d", "--every 2d: the interval must divide"), ("soon", "--every 'soon': expected a number and a unit"),
])
def test_every_errors(every: str, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        every_to_calendar(every)


@pytest.mark.parametrize(("expr", "cron"), [
    ("Sun 03:00", "0 3 * * 0"), ("Mon..Fri 08:30", "30 8 * * 1,2,3,4,5"), ("daily", "0 0 * * *"),
    ("*:0/15", "0,15,30,45 * * * *"), ("quarterly", "0 0 1 1,4,7,10 *"),
])
def test_cron_fields(expr: str, cron: str) -> None:
    assert to_cron(parse_calendar(expr)) == cron


@pytest.mark.parametrize(("expr", "message"), [
    ("minutely", "fires at seconds other than :00"),  # minutely is *:*:00 -> ok; checked below
    ("Mon *-*-1 00:00", "restricts both the weekday and the day of month"),
    ("2027-*-* 00:00", "names years"), ("*-*-* 00:00:30", "fires at seconds other than :00"),
])
def test_cron_refuses_what_it_cannot_say(expr: str, message: str) -> None:
    if expr == "minutely":
        assert to_cron(parse_calendar(expr)) == "* * * * *"
        return
    with pytest.raises(SpecError, match=message):
        to_cron(parse_calendar(expr))


@pytest.mark.parametrize(("expr", "message"), [
    ("", "empty calendar expression"), ("Funday 03:00", "unknown weekday 'Funday'"),
    ("Sat..Mon", "weekday range 'Sat..Mon' runs backwards"), ("*-*-* 25:00", "hour '25' out of range 0..23"),
    ("*-13-01", "month '13' out of range 1..12"), ("Sun 03:00 Europe/Berlin", "time zones are not supported"),
    ("*-*~1 00:00", "'~'"), ("*-*-* 03:00:00.5", "fractional seconds"), ("*-*-* 3:x", "bad minute 'x'"),
])
def test_calendar_errors(expr: str, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse_calendar(expr)
