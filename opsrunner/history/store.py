"""The run history: one interface (HistoryStore) over a SQLite file or a PostgreSQL database.

The SQL is written once; what differs between the two (connections, transactions,
placeholders, migrations) is behind history/backend.py. `open_history(location)` picks the
backend from the location: a postgresql:// URL or a file path.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.history import migrations, outcomes
from opsrunner.history.liveness import ControllerStamp, controller_gone, unrecorded_after
from opsrunner.history.location import default_location, default_path, is_postgres
from opsrunner.history.rows import (
    NOT_OK_SQL,
    RESULTS,
    RUN_COLUMNS,
    STAMP_COLUMNS,
    HostState,
    HostVerdict,
    RunFilter,
    RunRow,
    TaskRow,
    did_not_succeed,
    matches,
    result_of,
    row_fields,
    stamp_of,
)

if TYPE_CHECKING:
    from opsrunner.history.backend import Backend

#: The SQLite schema's versions (history/migrations.py has both backends').
MIGRATIONS = migrations.SQLITE
__all__ = ["MIGRATIONS", "RESULTS", "HistoryStore", "HostState", "HostVerdict", "RunFilter", "RunRow", "TaskRow",
           "default_location", "default_path", "open_history", "result_of", "row_fields"]


def _sql_columns(columns: tuple[str, ...]) -> list[str]:
    """Column names as SQL: `user` is a keyword of PostgreSQL's (the current role)."""
    return [f'"{c}"' if c == "user" else c for c in columns]


_SELECT_RUN = f"SELECT {', '.join(_sql_columns(RUN_COLUMNS + STAMP_COLUMNS))} FROM runs"
_TASK_COLUMNS = ("play", "task", "module", "host", "status", "changed", "handler", "msg", "diagnosis", "duration",
                 "log_tail", "stdout_tail", "stderr_tail")
_SELECT_TASKS = f"SELECT run_id, {', '.join(_TASK_COLUMNS)} FROM results"
_JSON_COLUMNS: dict[str, Any] = {"inventory": [], "extra_vars": {}, "recap": {}, "notes": [], "options": {},
                                 "in_flight": {}}


class HistoryStore:
    def __init__(self, location: Path | str | Backend, busy_timeout_s: float = 30.0, read_only: bool = False,
                 create: bool = True) -> None:
        """`location`: a SQLite file's path, a postgresql:// URL, or an open Backend.
        `read_only`: a reader that never writes (the dashboard); the database must exist at
        the current schema version (open it once writable to migrate it). `create`: a missing
        history is created; else NoHistory (backend.py), as for `read_only`."""
        self.backend = location if not isinstance(location, Path | str) else \
            _connect(location, busy_timeout_s, read_only, create)
        #: Where it is, as messages show it (a URL's password masked).
        self.path = self.backend.shown
        self.db = getattr(self.backend, "db", None)  # the SQLite connection, for tests and tools
        self._order = self.backend.insertion_order
        #: Outcomes kept beside the database that are not in it yet (outcomes.py): shown as recorded.
        self.kept: dict[str, dict[str, Any]] = {}
        self._kept_only: list[RunRow] = []
        if isinstance(location, Path | str) and outcomes.folder_for(location) is not None:
            self.kept = self._settle_kept(location, read_only)

    def _settle_kept(self, location: Path | str, read_only: bool) -> dict[str, dict[str, Any]]:
        """Record the outcomes kept beside the database in their rows and delete their files,
        where this store may write; those left (read-only, a disk still full) are returned.
        Blank reservations of runs closed or gone are deleted too."""
        found, blank = outcomes.kept(location)
        left: dict[str, dict[str, Any]] = {}
        for kept in found:
            try:
                if read_only:
                    raise PermissionError("a read-only reader")
                self.record_outcome(kept.row)
                outcomes.forget(kept.path)
            except Exception:  # recorded by a later writer; shown meanwhile
                left[kept.row["id"]] = kept.row
        for path in [] if read_only else blank:
            rows = self._q(f"{_SELECT_RUN} WHERE id = ?", (path.stem,))
            run = self._run(rows[0]) if rows else None
            if (run.exit_code is not None or run.aborted) if run else outcomes.older_than_a_day(path):
                outcomes.forget(path)
        if left:  # runs whose start never reached the database: shown from what they kept
            known = {r[0] for r in self._q(f"SELECT id FROM runs WHERE id IN ({', '.join('?' * len(left))})",
                                           list(left))}
            self._kept_only = [RunRow(**{c: row[c] for c in RUN_COLUMNS if c in row})
                               for run_id, row in left.items() if run_id not in known]
        return left

    def _tx(self, immediate: bool = False) -> AbstractContextManager[None]:
        return self.backend.transaction(lock=immediate)

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.backend.execute(sql, params)

    def close(self) -> None:
        self.backend.close()

    # -- writes -----------------------------------------------------------------------------
    def start_run(self, run: RunRow, stamp: ControllerStamp | None = None, heartbeat: float | None = None) -> None:
        """Insert the run's row. `heartbeat`: a time before every result the run may have
        reported by now (those are written later): its record is complete up to then."""
        with self._tx():
            self._insert(run, stamp, heartbeat)

    def _insert(self, run: RunRow, stamp: ControllerStamp | None, heartbeat: float | None = None) -> None:
        values = [json.dumps(getattr(run, c), default=str) if c in _JSON_COLUMNS else _flag_as_int(getattr(run, c))
                  for c in RUN_COLUMNS]
        values[RUN_COLUMNS.index("heartbeat")] = time.time() if heartbeat is None else min(heartbeat, time.time())
        values += [stamp.pid, stamp.start_ticks, stamp.machine] if stamp else [None, None, None]
        columns = RUN_COLUMNS + STAMP_COLUMNS
        self._q(f"INSERT INTO runs ({', '.join(_sql_columns(columns))}) VALUES ({', '.join('?' * len(columns))})",
                values)

    def record_outcome(self, fields: dict[str, Any]) -> None:
        """Record a run's end kept aside (row_fields, outcomes.py): its open row closed, or its
        whole row written where its start never was; a row closed meanwhile stays as it is."""
        run = RunRow(**{c: fields[c] for c in RUN_COLUMNS if c in fields})
        with self._tx(immediate=True):
            found = self._q("SELECT exit_code FROM runs WHERE id = ?" + self.backend.for_update, (run.id,))
            if not found:
                self._insert(run, stamp_of(*(fields.get(c) for c in STAMP_COLUMNS)))
            elif found[0][0] is None:
                self._q("UPDATE runs SET ended = ?, exit_code = ?, recap = ?, reason = ?, outcome = ?, record_gap = ?, "
                        "current_task = NULL, in_flight = NULL WHERE id = ?",
                        (run.ended, run.exit_code, json.dumps(run.recap), run.reason, run.outcome, run.record_gap,
                         run.id))

    def set_current_task(self, run_id: str, task: str) -> None:
        with self._tx():
            self._q("UPDATE runs SET current_task = ? WHERE id = ?", (task, run_id))

    def beat(self, run_id: str) -> None:
        """The controller is alive (liveness.py): stamped every HEARTBEAT_S while the run goes on."""
        with self._tx():
            self._q("UPDATE runs SET heartbeat = ? WHERE id = ?", (time.time(), run_id))

    def add_tasks(self, run_id: str, rows: list[tuple[int, TaskRow]]) -> None:
        """Task results in one transaction (a task's results on many hosts arrive together)."""
        with self._tx():
            self._add_tasks(run_id, rows)

    def record_progress(self, run_id: str, rows: list[tuple[int, TaskRow]], current_task: str | None,
                        at: float | None, in_flight: dict[str, Any] | None = None) -> None:
        """What a running controller has reported by `at`, in one transaction: its task results,
        the task it is in (None: unchanged) and that task's module, hosts and progress
        (`in_flight`, RunRow.in_flight; None: unchanged), and `at` as its heartbeat (None: the
        row's older one stays, still true). So a row's heartbeat also says how far its record
        is complete: every result reported before it is recorded (a killed controller's record
        says that results after it may be missing)."""
        changes = {"heartbeat": at, "current_task": current_task,
                   "in_flight": None if in_flight is None else json.dumps(in_flight)}
        sets = {column: value for column, value in changes.items() if value is not None}
        with self._tx():
            if rows:
                self._add_tasks(run_id, rows)
            if sets:
                self._q(f"UPDATE runs SET {', '.join(f'{c} = ?' for c in sets)} WHERE id = ?", [*sets.values(), run_id])

    def _add_tasks(self, run_id: str, rows: list[tuple[int, TaskRow]]) -> None:
        self.backend.executemany(f"INSERT INTO results (run_id, seq, {', '.join(_TASK_COLUMNS)}) "
                                 f"VALUES ({', '.join('?' * (len(_TASK_COLUMNS) + 2))})",
                                 [(run_id, seq, row.play, row.task, row.module, row.host, row.status,
                                   int(row.changed), int(row.handler), row.msg, row.diagnosis, row.duration,
                                   row.log_tail, row.stdout_tail, row.stderr_tail) for seq, row in rows])
        hosts_sql = self.backend.insert_ignore("run_hosts", "SELECT ?, id, started FROM runs WHERE id = ?")
        self.backend.executemany(hosts_sql, [(host, run_id) for host in sorted({row.host for _, row in rows})])

    def finish_run(self, run_id: str, exit_code: int, recap: dict[str, dict[str, int]],
                   reason: str | None = None) -> None:
        """Close the run's row: its exit code, its recap, and why it ended where it had none."""
        with self._tx():
            self._q("UPDATE runs SET ended = ?, exit_code = ?, recap = ?, reason = ?, current_task = NULL, "
                    "in_flight = NULL WHERE id = ?",
                    (time.time(), exit_code, json.dumps(recap), reason, run_id))

    def add_note(self, run_id: str, note: str) -> None:
        with self._tx(immediate=True):
            rows = self._q("SELECT notes FROM runs WHERE id = ?" + self.backend.for_update, (run_id,))
            if rows:
                notes = [*json.loads(rows[0][0]), note]
                self._q("UPDATE runs SET notes = ? WHERE id = ?", (json.dumps(notes), run_id))

    def prune(self, keep_days: float) -> int:
        """Delete the runs started more than `keep_days` ago (prune_runs); how many."""
        return self.prune_runs(keep_days)[0]

    def prune_runs(self, keep_days: float) -> tuple[int, int]:
        """Delete the runs started more than `keep_days` ago, except a run that may still be
        going on: an open row is deleted only when its controller is gone (liveness.py, as
        readers judge it), never under a live controller, whose later writes would fail.
        (deleted, kept because running). The runs deleted are exactly those read (and listed
        by prune_plan): a run read as open under a live controller and closed before the
        DELETE (PostgreSQL's READ COMMITTED lets it) is kept, as reported, not re-judged."""
        cutoff = time.time() - keep_days * 86400
        with self._tx(immediate=True):
            doomed, running = self._prunable(cutoff)
            for part in [doomed[i:i + 500] for i in range(0, len(doomed), 500)]:
                ids = ", ".join("?" * len(part))
                self._q(f"DELETE FROM results WHERE run_id IN ({ids})", part)
                self._q(f"DELETE FROM run_hosts WHERE run_id IN ({ids})", part)
                self._q(f"DELETE FROM runs WHERE id IN ({ids})", part)
        return len(doomed), running

    def prune_plan(self, keep_days: float) -> tuple[list[str], int]:
        """What prune_runs(keep_days) would delete now, by its rule, deleting nothing: the ids
        of those runs, oldest first, and how many it would keep because they may be running."""
        doomed, running = self._prunable(time.time() - keep_days * 86400)
        return doomed, running

    def _prunable(self, cutoff: float) -> tuple[list[str], int]:
        """The runs started before `cutoff` that prune_runs deletes, oldest first: (their ids,
        how many others are open under a controller that may live)."""
        rows = self._q("SELECT id, exit_code, heartbeat, started, controller_pid, controller_start, "
                       f"controller_machine FROM runs WHERE started < ? ORDER BY started, {self._order}", (cutoff,))
        doomed = [r[0] for r in rows if r[1] is not None or controller_gone(stamp_of(*r[4:]), r[2], r[3])]
        return doomed, len(rows) - len(doomed)

    def runs_by_id(self, ids: Sequence[str]) -> list[RunRow]:
        """These runs (those recorded), newest first as `runs` lists them, with their hosts."""
        runs: list[RunRow] = []
        for part in [list(ids[i:i + 500]) for i in range(0, len(ids), 500)]:
            runs += [self._run(r) for r in self._q(f"{_SELECT_RUN} WHERE id IN ({', '.join('?' * len(part))})", part)]
        if without_recap := [r for r in runs if not r.recap]:
            self._load_tasks(without_recap)
        order = {run_id: i for i, run_id in enumerate(ids)}
        return sorted(runs, key=lambda r: (r.started, order[r.id]), reverse=True)

    # -- reads ------------------------------------------------------------------------------
    def runs(self, playbook: str | None = None, host: str | None = None, failed: bool = False,
             schedule: str | None = None, limit: int = 20, with_tasks: bool = False, *,
             result: str | None = None, offset: int = 0, group: str | None = None) -> list[RunRow]:
        """Runs newest first, filtered; `with_tasks` loads every task row, otherwise only the
        hosts of runs that never reached a recap are looked up (from their task rows)."""
        wanted = RunFilter(playbook, host, schedule, result, failed, group)
        where, params = _where(wanted)
        if host:  # a host's runs, newest first, from its own index; each run looked up by id
            sql = _SELECT_RUN + " JOIN run_hosts ON run_hosts.run_id = runs.id WHERE " + " AND ".join(where)
            sql += " ORDER BY run_hosts.run_started DESC LIMIT ? OFFSET ?"
        else:
            sql = _SELECT_RUN + ((" WHERE " + " AND ".join(where)) if where else "")
            sql += f" ORDER BY started DESC, {self._order} DESC LIMIT ? OFFSET ?"
        runs = [self._run(r) for r in self._q(sql, [*params, limit, offset])]
        if wanted.not_ok:  # an open row whose controller is gone did not succeed either; one going on has not
            runs = [r for r in runs if did_not_succeed(r)]
        if kept := [r for r in self._kept_only if offset == 0 and matches(r, wanted)]:
            runs = sorted([*runs, *kept], key=lambda r: r.started, reverse=True)[:limit]
        if with_tasks and runs:
            self._load_tasks(runs)
        elif without_recap := [r for r in runs if not r.recap]:
            self._load_tasks(without_recap)
        return runs

    def group_runs(self, group: str, limit: int = 10000) -> list[RunRow]:
        """The runs of a run group (its slices), oldest first, with the hosts of each."""
        rows = self._q(f"{_SELECT_RUN} WHERE run_group = ? ORDER BY started, {self._order} LIMIT ?", (group, limit))
        runs = [self._run(r) for r in rows]
        if without_recap := [r for r in runs if not r.recap]:
            self._load_tasks(without_recap)
        return runs

    def durations(self, scan: int = 2000, per_playbook: int = 40) -> dict[str, list[tuple[str, float, float]]]:
        """(run id, start, seconds) of the latest finished real runs, oldest first, per playbook:
        a dry run (`--check`) skips what takes time (launches, waits), so it is not counted, nor
        is a run that reached no host (a `-l` that matched none, bad input): it ran nothing."""
        sql = ("SELECT id, playbook, started, ended FROM runs WHERE ended IS NOT NULL AND coalesce(check_mode, 0) = 0 "
               "AND recap IS NOT NULL AND recap != '{}' ORDER BY started DESC LIMIT ?")
        found: dict[str, list[tuple[str, float, float]]] = {}
        for run_id, playbook, started, ended in self._q(sql, (scan,)):
            points = found.setdefault(playbook or "", [])
            if len(points) < per_playbook:
                points.append((run_id, started, max(0.0, ended - started)))
        return {k: v[::-1] for k, v in sorted(found.items())}

    def host_verdicts(self, scan: int = 5000) -> list[HostState]:
        """Every host and playbook among the last `scan` runs with a recap or without an end:
        the recap line of its latest real run (its verdict), and of the latest dry run
        (`--check`) newer than that one. A dry run never replaces a real run's verdict. A run
        whose controller is gone (aborted) is a host's latest run as any other, its counts
        those of its recorded results; a run going on has no verdict yet."""
        sql = ("SELECT id, playbook, started, recap, check_mode, exit_code, heartbeat, controller_pid, "
               "controller_start, controller_machine FROM runs WHERE (recap IS NOT NULL AND recap != '{}') "
               f"OR exit_code IS NULL ORDER BY started DESC, {self._order} DESC LIMIT ?")
        found = self._q(sql, (scan,))
        aborted = {r[0] for r in found if r[5] is None and r[0] not in self.kept
                   and controller_gone(stamp_of(*r[7:10]), r[6], r[2])}
        recorded = self._recorded_counts(sorted(aborted))
        real: dict[tuple[str, str], HostVerdict] = {}
        dry: dict[tuple[str, str], HostVerdict] = {}
        for run_id, playbook, started, recap, check_mode, exit_code, *_ in found:
            if run_id in aborted:
                by_host = recorded.get(run_id, {})
            elif exit_code is None:  # going on, or ended with its end kept beside the database
                by_host = self.kept.get(run_id, {}).get("recap") or {}
            else:
                by_host = json.loads(recap)
            for host, counts in by_host.items():
                key, gone = (host, playbook), run_id in aborted
                if not check_mode:
                    real.setdefault(key, HostVerdict(host, playbook, run_id, started, counts, aborted=gone))
                elif key not in real:  # newer than the real verdict (newest first)
                    dry.setdefault(key, HostVerdict(host, playbook, run_id, started, counts, check_mode=True,
                                                    aborted=gone))
        return [HostState(host, playbook, real.get((host, playbook)), dry.get((host, playbook)))
                for host, playbook in sorted(real.keys() | dry.keys())]

    def _recorded_counts(self, run_ids: list[str]) -> dict[str, dict[str, dict[str, int]]]:
        """Per run and host, its recorded results counted as a recap counts them (a changed
        result is ok and changed): what the record of a run that never reached its recap shows."""
        counts: dict[str, dict[str, dict[str, int]]] = {}
        for part in [run_ids[i:i + 500] for i in range(0, len(run_ids), 500)]:
            sql = f"SELECT run_id, host, status, changed FROM results WHERE run_id IN ({', '.join('?' * len(part))})"
            for run_id, host, status, was_changed in self._q(sql, part):
                host_counts = counts.setdefault(run_id, {}).setdefault(host, {})
                for key in _recap_keys(str(status), bool(was_changed)):
                    host_counts[key] = host_counts.get(key, 0) + 1
        return counts

    def candidates(self, part: str, limit: int = 10) -> list[str]:
        """Run ids that start or end with `part` (a prefix, or the random part people copy), newest first."""
        rows = self._q("SELECT id FROM runs WHERE id LIKE ? OR id LIKE ? ORDER BY started DESC LIMIT ?",
                       (_like_prefix(part), _like_suffix(part), limit))
        return [r[0] for r in rows]

    def last_run_id(self) -> str | None:
        rows = self._q(f"SELECT id, started FROM runs ORDER BY started DESC, {self._order} DESC LIMIT 1")
        newest = max([*self._kept_only, *(RunRow(id=r[0], started=r[1]) for r in rows)],
                     key=lambda r: r.started, default=None)
        return newest.id if newest else None

    def run(self, run_id: str) -> RunRow | None:
        """A run by id, or by a part of one that only it starts or ends with (its random part,
        `bd552624`, is what people copy), with its task results."""
        rows = self._q(f"{_SELECT_RUN} WHERE id = ?", (run_id,)) or \
            self._q(f"{_SELECT_RUN} WHERE id LIKE ? OR id LIKE ? LIMIT 2", (_like_prefix(run_id), _like_suffix(run_id)))
        kept = [r for r in self._kept_only
                if r.id.startswith(run_id) or (len(run_id) >= MIN_SUFFIX and r.id.endswith(run_id))]
        if len(rows) + len(kept) == 1 and kept:
            return kept[0]
        if len(rows) != 1 or kept:
            return None
        run = self._run(rows[0])
        self._load_tasks([run])
        return run

    def _load_tasks(self, runs: list[RunRow]) -> None:
        """Every task result of these runs, in order, in one query."""
        by_id = {r.id: r for r in runs}
        sql = f"{_SELECT_TASKS} WHERE run_id IN ({', '.join('?' * len(by_id))}) ORDER BY run_id, seq"
        for r in self._q(sql, list(by_id)):
            by_id[r[0]].tasks.append(TaskRow(r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]), r[8] or "",
                                             r[9] or "", r[10] or 0.0, r[11] or "", r[12] or "", r[13] or ""))

    def _run(self, row: tuple[Any, ...]) -> RunRow:
        data = dict(zip(RUN_COLUMNS, row[:len(RUN_COLUMNS)], strict=True))
        for key, empty in _JSON_COLUMNS.items():
            data[key] = json.loads(data[key]) if data[key] else empty
        data["git_dirty"] = None if data["git_dirty"] is None else bool(data["git_dirty"])
        data["check_mode"] = bool(data["check_mode"])
        run = RunRow(**data, controller_stamp=stamp_of(*row[len(RUN_COLUMNS):]))
        if run.exit_code is None and run.id in self.kept:  # ended; its end is kept beside the database
            done = self.kept[run.id]
            run = dataclasses.replace(run, current_task=None, in_flight={}, recap=done.get("recap") or {},
                                      ended=done.get("ended"), exit_code=done.get("exit_code"),
                                      reason=done.get("reason"), outcome=done.get("outcome"),
                                      record_gap=done.get("record_gap"))
        if run.exit_code is None:
            run.aborted = controller_gone(run.controller_stamp, run.heartbeat, run.started)
            if run.aborted:  # what its controller reported last may not have been written
                run.record_gap = unrecorded_after(run.heartbeat, run.started)
        return run


def _recap_keys(status: str, was_changed: bool) -> tuple[str, ...]:
    """The recap counters a recorded result adds to (results.py's HostStats.count; the record
    does not say whether a failure was ignored or rescued: it counts as failed)."""
    if status in ("unreachable", "skipped"):
        return (status,)
    if status in ("failed", "timed_out", "interrupted"):
        return ("failed",)
    return ("ok", "changed") if was_changed or status == "changed" else ("ok",)


def _flag_as_int(value: Any) -> Any:
    """Flags are INTEGER columns on both backends (PostgreSQL takes no bool into one)."""
    return int(value) if isinstance(value, bool) else value


def _like_prefix(prefix: str) -> str:
    return prefix.replace("%", "").replace("_", "") + "%"


#: The shortest part of an id matched at its end: the random part is 8 characters, and a
#: digit or two at the end would pick a run by chance.
MIN_SUFFIX = 4


def _like_suffix(suffix: str) -> str:
    """LIKE's pattern of ids that end with `suffix`; one shorter than MIN_SUFFIX matches none."""
    part = suffix.replace("%", "").replace("_", "")
    return "%" + part if len(part) >= MIN_SUFFIX else ""


def _where(f: RunFilter) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if f.playbook:
        where.append("(playbook = ? OR playbook LIKE ?)")
        params += [f.playbook, f"%/{f.playbook}"]
    if f.host:  # joined by runs(): the host's rows of run_hosts
        where.append("run_hosts.host = ?")
        params.append(f.host)
    if f.not_ok:
        where.append(NOT_OK_SQL)
    if f.schedule:
        where.append("schedule = ?")
        params.append(f.schedule)
    if f.group:
        where.append("run_group = ?")
        params.append(f.group)
    where += {"ok": ["exit_code = 0", "coalesce(check_mode, 0) = 0"],
              "unfinished": ["exit_code IS NULL"],
              "dry-run": ["coalesce(check_mode, 0) != 0"]}.get(f.result or "", [])
    return where, params


def open_history(location: Path | str | None = None, busy_timeout_s: float = 30.0,
                 read_only: bool = False) -> HistoryStore:
    """The history at `location` (a file path or a postgresql:// URL; default
    $OPSRUNNER_HISTORY or the user's file), migrated to this version unless `read_only`."""
    return HistoryStore(default_location() if location is None or location == "" else location,
                        busy_timeout_s, read_only)


def _connect(location: Path | str, busy_timeout_s: float, read_only: bool, create: bool) -> Backend:
    if is_postgres(location):
        from opsrunner.history.postgres_backend import PostgresBackend  # psycopg: only for a URL

        return PostgresBackend(str(location), busy_timeout_s, read_only, create)
    from opsrunner.history.sqlite_backend import SQLiteBackend

    return SQLiteBackend(Path(location), busy_timeout_s, read_only, create)
