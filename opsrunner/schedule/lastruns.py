"""The last run of each schedule, read from the run history its runs are recorded in:
`schedule list` and the dashboard's schedules page ask the same question the same way."""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opsrunner.history.location import display, without_password

if TYPE_CHECKING:
    from opsrunner.history.store import HistoryStore, RunRow
    from opsrunner.schedule.store import Schedule


def history_of(schedule: Schedule, *given: str | None) -> str | None:
    """Where the schedule's runs are recorded (None: its file names none). Its PostgreSQL URL
    has no password: one comes from a location given here or in $OPSRUNNER_HISTORY that names
    the same database with one, else libpq finds it (~/.pgpass, $PGPASSWORD)."""
    from opsrunner.history.location import is_postgres

    recorded = schedule.history_location()
    if recorded and is_postgres(recorded):
        for other in (*given, os.environ.get("OPSRUNNER_HISTORY")):
            if other and is_postgres(other) and without_password(other) == without_password(recorded):
                return other
    return recorded



@dataclass(frozen=True)
class LastRun:
    """A schedule's last run, as the run history its runs are recorded in holds it."""

    #: That history (history_of; the default where its file names none), password and all:
    #: never shown (`shown` is).
    location: str
    #: The same as messages and pages show it: a URL's password masked.
    shown: str
    #: Its last recorded run; None: none recorded there (or `error`).
    run: RunRow | None = None
    #: Why the history cannot be read (its passwords masked); None where it was read.
    error: str | None = None
    #: A SQLite file that does not exist: no run was ever recorded there (none is made here).
    missing: bool = False


class LastRuns:
    """The last run of each schedule (`schedule list`, the dashboard's schedules page), read
    from the run history its runs are recorded in: its file's `history`, else `default`. Each
    distinct history is opened once (closed by close(), except those given open in `opened`);
    one that cannot be opened or read (a corrupt file, a database that does not answer, a
    password that libpq cannot find) is tried once, and its schedules' LastRun says why."""

    def __init__(self, default: str, given: str | None, read_only: bool = False,
                 opened: dict[str, HistoryStore] | None = None) -> None:
        self.default = default  # for schedule files that name none
        self.given = given  # --history: also the password of a schedule's PostgreSQL history
        self.read_only = read_only
        self.stores: dict[str, HistoryStore] = {same_history(k): v for k, v in (opened or {}).items()}
        self._borrowed = set(self.stores)
        #: Each history that could not be read, as shown: why (printed once by `schedule list`).
        self.unreadable: dict[str, str] = {}
        self._failed: dict[str, str] = {}

    def last(self, schedule: Schedule) -> LastRun:
        from opsrunner.history.location import is_postgres

        where = history_of(schedule, self.given) or self.default
        key, shown = same_history(where), display(where)
        if key in self._failed:
            return LastRun(where, shown, error=self._failed[key])
        if key not in self.stores and not is_postgres(where) and not Path(where).exists():
            return LastRun(where, shown, missing=True)  # a file not yet written: no run recorded
        try:
            if key not in self.stores:
                from opsrunner.history.store import HistoryStore

                self.stores[key] = HistoryStore(where, busy_timeout_s=5.0 if self.read_only else 30.0,
                                                read_only=self.read_only)
            found = by_end(self.stores[key], schedule.name)
        except Exception as exc:  # whatever the database driver raises
            from opsrunner.history.location import scrub

            self._failed[key] = self.unreadable[shown] = " ".join(scrub(f"{type(exc).__name__}: {exc}",
                                                                          where).split())  # one line
            return LastRun(where, shown, error=self._failed[key])
        return LastRun(where, shown, run=found[0] if found else None)

    def close(self) -> None:
        for key, store in self.stores.items():
            if key not in self._borrowed:
                with contextlib.suppress(Exception):
                    store.close()


#: How many of a schedule's latest starts by_end() looks at for the one that ended last.
SCAN = 20


def ended_at(run: RunRow) -> float:
    """When a run's outcome became known: its end; an aborted run's last heartbeat (else its
    start); a run still going on has none yet (infinity: it is the schedule's state meanwhile)."""
    if run.ended is not None:
        return run.ended
    if run.exit_code is None and not run.aborted:
        return math.inf
    return run.heartbeat or run.started


def by_end(store: HistoryStore, schedule: str, scan: int = SCAN) -> list[RunRow]:
    """The schedule's runs among its `scan` latest starts, the one that ended last first (a run
    going on before all): a run refused by the run lock while an earlier one went on ends
    first, and the earlier one's outcome, known later, is the schedule's last result."""
    return sorted(store.runs(schedule=schedule, limit=scan), key=ended_at, reverse=True)


def same_history(location: str) -> str:
    """What two locations of one run history have in common: a URL without its password, a
    file's real path."""
    from opsrunner.history.location import is_postgres

    return without_password(location) if is_postgres(location) else os.path.realpath(location)
