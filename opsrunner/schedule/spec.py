"""systemd OnCalendar expressions (the subset opsrunner accepts), `--every` intervals, the
next run time, and the cron line for the same schedule.

Accepted: the shorthands (minutely, hourly, daily, weekly, monthly, quarterly,
semiannually, yearly/annually) and `[WEEKDAYS] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]]`,
each number a `*`, a value, a list `a,b`, a range `a..b` or a repetition `a/n`, `a..b/n`.
Not accepted (a clear error instead): time zones, `~` (last days of a month), fractional
seconds. Times are the controller's local time, as systemd's timers use.

Written here because no maintained Python library reads OnCalendar expressions or turns
them into cron fields: systemd's own parser is a command (`systemd-analyze calendar`, which
cron.py asks where it is installed), and croniter reads cron, not OnCalendar.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

SHORTHANDS = {
    "minutely": "*-*-* *:*:00", "hourly": "*-*-* *:00:00", "daily": "*-*-* 00:00:00",
    "weekly": "Mon *-*-* 00:00:00", "monthly": "*-*-01 00:00:00", "yearly": "*-01-01 00:00:00",
    "annually": "*-01-01 00:00:00", "quarterly": "*-01,04,07,10-01 00:00:00",
    "semiannually": "*-01,07-01 00:00:00",
}
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_LIMITS = {"year": (1970, 2199), "month": (1, 12), "day": (1, 31), "hour": (0, 23), "minute": (0, 59),
           "second": (0, 59)}
#: How far ahead next_run looks (a 29 February on a Monday can be decades away; beyond this: None).
SEARCH_DAYS = 366 * 30


class SpecError(ValueError):
    """A calendar or interval expression opsrunner cannot use; the message says what is wrong."""


@dataclass(frozen=True)
class CalendarSpec:
    """An OnCalendar expression. None in a field means every value."""

    text: str
    weekdays: frozenset[int] | None
    years: frozenset[int] | None
    months: frozenset[int] | None
    days: frozenset[int] | None
    hours: frozenset[int] | None
    minutes: frozenset[int] | None
    seconds: frozenset[int] | None

    def matches_day(self, day: dt.date) -> bool:
        return all(values is None or v in values for values, v in (
            (self.years, day.year), (self.months, day.month), (self.days, day.day),
            (self.weekdays, day.weekday())))

    def next_run(self, after: dt.datetime) -> dt.datetime | None:
        """The first time strictly after `after` (naive local time) that matches."""
        day = after.date()
        for offset in range(SEARCH_DAYS):
            current = day + dt.timedelta(days=offset)
            if not self.matches_day(current):
                continue
            floor = after.time() if offset == 0 else None
            clock = self._first_time(floor)
            if clock is not None:
                return dt.datetime.combine(current, clock)
        return None

    def _first_time(self, floor: dt.time | None) -> dt.time | None:
        """The earliest matching time of day strictly after floor (any, if floor is None)."""
        low = (-1, -1, -1) if floor is None else (floor.hour, floor.minute, floor.second)
        for h in _values(self.hours, "hour"):
            if h < low[0]:
                continue
            for m in _values(self.minutes, "minute"):
                if (h, m) < low[:2]:
                    continue
                for s in _values(self.seconds, "second"):
                    if (h, m, s) > low:
                        return dt.time(h, m, s)
        return None


def _values(values: frozenset[int] | None, field: str) -> list[int]:
    lo, hi = _LIMITS[field]
    return sorted(values) if values is not None else list(range(lo, hi + 1))


def parse_calendar(text: str) -> CalendarSpec:
    expr = " ".join(text.split())
    if not expr:
        raise SpecError("empty calendar expression")
    expanded = SHORTHANDS.get(expr.lower(), expr)
    parts = expanded.split(" ")
    weekdays = None
    if parts and re.match(r"^[A-Za-z]", parts[0]):
        weekdays = _weekdays(parts.pop(0), text)
    date_part = time_part = None
    for part in parts:
        if ":" in part and time_part is None:
            time_part = part
        elif "-" in part and date_part is None and time_part is None:
            date_part = part
        else:
            raise SpecError(f"cannot read {part!r} in calendar expression {text!r} "
                            "(time zones are not supported; use the controller's local time)")
    if "~" in (date_part or ""):
        raise SpecError(f"'~' (days counted from the end of the month) is not supported: {text!r}")
    years, months, days = _date(date_part or "*-*-*", text)
    hours, minutes, seconds = _time(time_part or "00:00:00", text)
    return CalendarSpec(expr, weekdays, years, months, days, hours, minutes, seconds)


def _weekdays(part: str, text: str) -> frozenset[int]:
    found: set[int] = set()
    for item in part.split(","):
        ends = item.split("..")
        if len(ends) > 2:
            raise SpecError(f"bad weekday range {item!r} in {text!r}")
        idx = [_weekday(e, text) for e in ends]
        if len(idx) == 2 and idx[0] > idx[1]:
            raise SpecError(f"weekday range {item!r} runs backwards in {text!r} (systemd refuses it too)")
        found.update(range(idx[0], idx[-1] + 1))
    return frozenset(found)


def _weekday(name: str, text: str) -> int:
    low = name.lower()
    if low in WEEKDAYS:
        return WEEKDAYS.index(low)
    if low in _FULL_DAYS:
        return _FULL_DAYS.index(low)
    raise SpecError(f"unknown weekday {name!r} in {text!r} (use Mon, Tue, Wed, Thu, Fri, Sat, Sun)")


def _date(part: str, text: str) -> tuple[frozenset[int] | None, ...]:
    pieces = part.split("-")
    if len(pieces) == 2:
        pieces = ["*", *pieces]
    if len(pieces) != 3:
        raise SpecError(f"bad date {part!r} in {text!r} (expected YEAR-MONTH-DAY or MONTH-DAY)")
    return tuple(_field(p, f, text) for p, f in zip(pieces, ("year", "month", "day"), strict=True))


def _time(part: str, text: str) -> tuple[frozenset[int] | None, ...]:
    pieces = part.split(":")
    if len(pieces) == 2:
        pieces.append("00")
    if len(pieces) != 3:
        raise SpecError(f"bad time {part!r} in {text!r} (expected HOUR:MINUTE[:SECOND])")
    if "." in pieces[2]:
        raise SpecError(f"fractional seconds are not supported: {text!r}")
    return tuple(_field(p, f, text) for p, f in zip(pieces, ("hour", "minute", "second"), strict=True))


def _field(piece: str, field: str, text: str) -> frozenset[int] | None:
    lo, hi = _LIMITS[field]
    if piece == "*":
        return None
    found: set[int] = set()
    for item in piece.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:\.\.(\d+))?(?:/(\d+))?", item)
        if not m:
            raise SpecError(f"bad {field} {item!r} in {text!r}")
        start = lo if m.group(1) == "*" else int(m.group(1))
        end = int(m.group(2)) if m.group(2) else (hi if m.group(3) or m.group(1) == "*" else start)
        step = int(m.group(3) or 1)
        if not (lo <= start <= hi and lo <= end <= hi) or step < 1 or end < start:
            raise SpecError(f"{field} {item!r} out of range {lo}..{hi} in {text!r}")
        found.update(range(start, end + 1, step))
    return frozenset(found)


_EVERY = re.compile(r"^(\d+)\s*(m|min|minutes?|h|hours?|d|days?)$")


def every_to_calendar(every: str) -> str:
    """`--every 6h` as an OnCalendar expression (so Persistent= and cron work the same way):
    minutes that divide an hour (1m..60m), whole hours that divide a day (1h..24h), or 1d."""
    m = _EVERY.match(every.strip().lower())
    if not m:
        raise SpecError(f"--every {every!r}: expected a number and a unit, e.g. 15m, 6h, 1d")
    minutes = int(m.group(1)) * {"m": 1, "h": 60, "d": 24 * 60}[m.group(2)[0]]
    if minutes == 1:
        return "*-*-* *:*:00"
    if minutes == 60:  # hourly: 00/60 is no minute step systemd takes
        return "*-*-* *:00:00"
    if minutes == 24 * 60:  # daily: likewise 00/24 for hours
        return "*-*-* 00:00:00"
    if 0 < minutes < 60 and 60 % minutes == 0:
        return f"*-*-* *:00/{minutes}:00"
    if 0 < minutes < 24 * 60 and minutes % 60 == 0 and (24 * 60) % minutes == 0:
        return f"*-*-* 00/{minutes // 60}:00:00"
    raise SpecError(f"--every {every}: the interval must divide an hour (minutes) or a day (hours), or be 1d: "
                    "1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60 minutes, 1, 2, 3, 4, 6, 8, 12 or 24 hours; "
                    "use --at with an OnCalendar expression for anything else")


def to_cron(spec: CalendarSpec) -> str:
    """The five cron fields for the same times; SpecError where cron cannot say it."""
    if spec.seconds != frozenset({0}):
        raise SpecError(f"{spec.text!r} fires at seconds other than :00; cron cannot express that")
    if spec.years is not None:
        raise SpecError(f"{spec.text!r} names years; cron cannot express that")
    if spec.weekdays is not None and spec.days is not None:
        # cron ORs day-of-month and day-of-week where systemd ANDs them
        raise SpecError(f"{spec.text!r} restricts both the weekday and the day of month; cron would OR them")

    def field(values: frozenset[int] | None) -> str:
        return "*" if values is None else ",".join(str(v) for v in sorted(values))

    dow = "*" if spec.weekdays is None else ",".join(str((d + 1) % 7) for d in sorted(spec.weekdays))
    return f"{field(spec.minutes)} {field(spec.hours)} {field(spec.days)} {field(spec.months)} {dow}"
