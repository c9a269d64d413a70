"""Schedules people already write: a standard 5-field cron expression for `--at`, validated
and its next runs computed by croniter; and a check of an OnCalendar expression by systemd's
own parser, `systemd-analyze calendar`, where it is installed.

A cron schedule is installed as written by `--cron`. For a systemd timer it becomes an
OnCalendar expression: croniter expands each field to its values and they are written as
OnCalendar lists (no library translates cron to OnCalendar, so this short step is ours).
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from dataclasses import dataclass

from opsrunner.schedule.spec import SpecError

_DAY_NAMES = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")  # cron counts from Sunday, 0 (and 7)


def is_cron(text: str) -> bool:
    """Five fields separated by blanks: a cron expression (no OnCalendar expression has five)."""
    return len(text.split()) == 5


@dataclass(frozen=True)
class CronSpec:
    text: str

    def next_run(self, after: dt.datetime) -> dt.datetime | None:
        """The first time strictly after `after`; None where no date matches (`0 3 31 2 *`)."""
        from croniter import croniter

        try:
            found: dt.datetime = croniter(self.text, after).get_next(dt.datetime)
        except (ValueError, OverflowError):  # croniter's CroniterBadDateError is a ValueError
            return None
        return found


def parse_cron(text: str) -> CronSpec:
    from croniter import CroniterError, croniter

    expr = " ".join(text.split())
    try:
        croniter(expr)
    except (CroniterError, ValueError) as exc:
        raise SpecError(f"bad cron expression {text!r}: {exc}") from None
    return CronSpec(expr)


def cron_to_calendar(spec: CronSpec) -> str:
    """The OnCalendar expression of the same times; SpecError where systemd cannot say it."""
    from croniter import croniter

    minutes, hours, days, months, weekdays = croniter.expand(spec.text)[0][:5]
    if days != ["*"] and weekdays != ["*"]:
        # cron ORs day-of-month and day-of-week where systemd ANDs them
        raise SpecError(f"cron expression {spec.text!r} restricts both the day of month and the weekday, "
                        "which cron ORs and a systemd timer would AND; install it with --cron")

    def listed(values: list[int | str], width: int = 2) -> str:
        return "*" if values == ["*"] else ",".join(f"{int(v):0{width}d}" for v in values)

    names = "" if weekdays == ["*"] else ",".join(dict.fromkeys(_DAY_NAMES[int(d) % 7] for d in weekdays)) + " "
    return f"{names}*-{listed(months)}-{listed(days)} {listed(hours)}:{listed(minutes)}:00"


def systemd_verdict(calendar: str) -> str | None:
    """systemd's own judgement of an OnCalendar expression: why it refuses it, or None (also
    where systemd-analyze is not installed: then opsrunner's parser alone has judged it)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return None
    try:
        proc = subprocess.run([analyze, "calendar", "--iterations=1", calendar], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or [f"refused (exit {proc.returncode})"])[-1]
