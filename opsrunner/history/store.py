"""The history database: stdlib sqlite3 in WAL mode, schema versions in PRAGMA user_version.

Each write is one short transaction, so parallel runs (a timer and a person) interleave
safely; readers never block writers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsrunner.history.liveness import GONE, ControllerStamp, controller_gone

#: Each entry moves the schema one version up; never edit an entry once released.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, started REAL NOT NULL, ended REAL, user TEXT, controller TEXT,
        command TEXT, cwd TEXT, playbook TEXT, git_commit TEXT, git_dirty INTEGER,
        inventory TEXT, extra_vars TEXT, schedule TEXT, exit_code INTEGER, recap TEXT,
        notes TEXT NOT NULL DEFAULT '[]'
    );
    CREATE INDEX runs_started ON runs(started);
    CREATE TABLE results (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, seq INTEGER NOT NULL,
        play TEXT, task TEXT, module TEXT, host TEXT, status TEXT, changed INTEGER, handler INTEGER,
        msg TEXT, diagnosis TEXT, duration REAL, PRIMARY KEY (run_id, seq)
    );
    CREATE INDEX results_host ON results(host);
    """,
    # 2: who runs an open run, and its heartbeat (liveness.py): a row whose controller died
    # without closing it is shown as aborted, never as running.
    """
    ALTER TABLE runs ADD COLUMN heartbeat REAL;
    ALTER TABLE runs ADD COLUMN controller_pid INTEGER;
    ALTER TABLE runs ADD COLUMN controller_start INTEGER;
    ALTER TABLE runs ADD COLUMN controller_machine TEXT;
    ALTER TABLE runs ADD COLUMN current_task TEXT;
    CREATE INDEX results_run ON results(run_id, seq);
    """,
    # 3: what the dashboard and alerts show: the run's options (limit, tags, check mode), a
    # verify's log tail; the hosts of each run, newest first per host (the host filter reads
    # a host's runs from it instead of testing every run: 1 s -> 1 ms at 100,000 runs), and
    # the runs of a schedule.
    """
    ALTER TABLE runs ADD COLUMN check_mode INTEGER;
    ALTER TABLE runs ADD COLUMN options TEXT;
    ALTER TABLE results ADD COLUMN log_tail TEXT;
    CREATE INDEX runs_schedule ON runs(schedule, started);
    CREATE TABLE run_hosts (
        host TEXT NOT NULL, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        run_started REAL NOT NULL, PRIMARY KEY (host, run_id)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO run_hosts SELECT DISTINCT results.host, results.run_id, runs.started
        FROM results JOIN runs ON runs.id = results.run_id WHERE results.host IS NOT NULL;
    CREATE INDEX run_hosts_by_time ON run_hosts(host, run_started);
    """,
)


def default_path() -> Path:
    env = os.environ.get("OPSRUNNER_HISTORY")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "opsrunner" / "history.db"


@dataclass
class TaskRow:
    play: str
    task: str
    module: str
    host: str
    status: str
    changed: bool
    handler: bool
    msg: str
    diagnosis: str
    duration: float
    #: The last lines of the job's log that a failed verify (or launch) saw.
    log_tail: str = ""


@dataclass
class RunRow:
    id: str
    started: float
    ended: float | None = None
    user: str = ""
    controller: str = ""
    command: str = ""
    cwd: str = ""
    playbook: str = ""
    git_commit: str | None = None
    git_dirty: bool | None = None
    inventory: list[str] = field(default_factory=list)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    schedule: str | None = None
    exit_code: int | None = None
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    heartbeat: float | None = None
    #: A dry run (`--check`): nothing was changed.
    check_mode: bool = False
    #: The run's options as the command line gave them: limit, tags, skip_tags, diff, forks.
    options: dict[str, Any] = field(default_factory=dict)
    #: The task an unfinished run is in (its hosts' last TaskStart), for a run that never ends.
    current_task: str | None = None
    controller_stamp: ControllerStamp | None = None
    #: Set by the reader: an unfinished run whose controller is gone (liveness.py).
    aborted: bool = False

    @property
    def result(self) -> str:
        if self.exit_code is None:
            return GONE if self.aborted else "running"
        return {0: "ok", 2: "failed", 3: "unreachable", 4: "bad input", 99: "interrupted",
                143: "terminated"}.get(self.exit_code, "error")

    @property
    def label(self) -> str:
        """The result as people read it: ok, failed (exit 2), running, aborted, dry run."""
        if self.exit_code is None:
            text = "aborted" if self.aborted else "running"
        else:
            text = "ok" if self.exit_code == 0 else f"{self.result} (exit {self.exit_code})"
        if self.check_mode:
            return "dry run" if text == "ok" else f"dry run {text}"
        return text

    @property
    def hosts(self) -> list[str]:
        """The run's hosts: its recap's, or for a run that never reached it, those of its task rows."""
        return list(self.recap) or sorted({t.host for t in self.tasks})

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("tasks", "controller_stamp", "aborted")}
        stamp = self.controller_stamp
        data["controller_pid"] = stamp.pid if stamp else None
        data["result"] = self.result
        data["label"] = self.label
        data["tasks"] = [t.__dict__ for t in self.tasks]
        return data


_RUN_COLUMNS = ("id", "started", "ended", "user", "controller", "command", "cwd", "playbook", "git_commit",
                "git_dirty", "inventory", "extra_vars", "schedule", "exit_code", "recap", "notes", "heartbeat",
                "current_task", "check_mode", "options")
_STAMP_COLUMNS = ("controller_pid", "controller_start", "controller_machine")
_SELECT_RUN = f"SELECT {', '.join(_RUN_COLUMNS + _STAMP_COLUMNS)} FROM runs"
_TASK_COLUMNS = ("play", "task", "module", "host", "status", "changed", "handler", "msg", "diagnosis", "duration",
                 "log_tail")
_SELECT_TASKS = f"SELECT run_id, {', '.join(_TASK_COLUMNS)} FROM results"
_JSON_COLUMNS: dict[str, Any] = {"inventory": [], "extra_vars": {}, "recap": {}, "notes": [], "options": {}}


class HistoryStore:
    def __init__(self, path: Path, busy_timeout_s: float = 30.0, read_only: bool = False) -> None:
        """`read_only`: a reader that never writes (the dashboard); the database must exist
        at the current schema version (open it once writable to migrate it)."""
        self.path = path
        if read_only:
            self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s,
                                      isolation_level=None, check_same_thread=False)
            version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
            if version != len(MIGRATIONS):
                self.db.close()
                raise sqlite3.OperationalError(f"schema version {version}, expected {len(MIGRATIONS)}")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # command lines and messages: readable by its owner only (-wal/-shm follow)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        # Used by one thread at a time: the recorder's writer thread, then the thread that ends the run.
        self.db = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None,
                                  check_same_thread=False)
        self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self.db.execute("PRAGMA journal_mode = WAL")
        # WAL with synchronous=NORMAL: a commit is not fsynced (checkpoints are), so a row per
        # task costs ~0.05 ms instead of ~2 ms; a power cut may lose the last rows, never the
        # database's consistency.
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    def _migrate(self) -> None:
        with self._tx(immediate=True):
            version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
            for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                for statement in filter(str.strip, script.split(";")):
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {number}")

    @contextmanager
    def _tx(self, immediate: bool = False) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    # -- writes -----------------------------------------------------------------------------
    def start_run(self, run: RunRow, stamp: ControllerStamp | None = None) -> None:
        values = [json.dumps(getattr(run, c), default=str) if c in _JSON_COLUMNS else getattr(run, c)
                  for c in _RUN_COLUMNS]
        values[_RUN_COLUMNS.index("heartbeat")] = time.time()
        values += [stamp.pid, stamp.start_ticks, stamp.machine] if stamp else [None, None, None]
        columns = _RUN_COLUMNS + _STAMP_COLUMNS
        with self._tx():
            self.db.execute(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                            values)

    def set_current_task(self, run_id: str, task: str) -> None:
        with self._tx():
            self.db.execute("UPDATE runs SET current_task = ? WHERE id = ?", (task, run_id))

    def beat(self, run_id: str) -> None:
        """The controller is alive (liveness.py): stamped every HEARTBEAT_S while the run goes on."""
        with self._tx():
            self.db.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (time.time(), run_id))

    def add_tasks(self, run_id: str, rows: list[tuple[int, TaskRow]]) -> None:
        """Task results in one transaction (a task's results on many hosts arrive together)."""
        with self._tx():
            self.db.executemany(f"INSERT INTO results (run_id, seq, {', '.join(_TASK_COLUMNS)}) "
                                f"VALUES ({', '.join('?' * (len(_TASK_COLUMNS) + 2))})",
                                [(run_id, seq, row.play, row.task, row.module, row.host, row.status,
                                  int(row.changed), int(row.handler), row.msg, row.diagnosis, row.duration,
                                  row.log_tail) for seq, row in rows])
            self.db.executemany("INSERT OR IGNORE INTO run_hosts SELECT ?, id, started FROM runs WHERE id = ?",
                                [(host, run_id) for host in sorted({row.host for _, row in rows})])

    def finish_run(self, run_id: str, exit_code: int, recap: dict[str, dict[str, int]]) -> None:
        with self._tx():
            self.db.execute("UPDATE runs SET ended = ?, exit_code = ?, recap = ?, current_task = NULL WHERE id = ?",
                            (time.time(), exit_code, json.dumps(recap), run_id))

    def add_note(self, run_id: str, note: str) -> None:
        with self._tx(immediate=True):
            row = self.db.execute("SELECT notes FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is not None:
                notes = [*json.loads(row[0]), note]
                self.db.execute("UPDATE runs SET notes = ? WHERE id = ?", (json.dumps(notes), run_id))

    def prune(self, keep_days: float) -> int:
        cutoff = time.time() - keep_days * 86400
        with self._tx():
            ids = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE started < ?", (cutoff,))]
            self.db.execute("DELETE FROM results WHERE run_id IN (SELECT id FROM runs WHERE started < ?)", (cutoff,))
            self.db.execute("DELETE FROM run_hosts WHERE run_started < ?", (cutoff,))
            self.db.execute("DELETE FROM runs WHERE started < ?", (cutoff,))
        return len(ids)

    # -- reads ------------------------------------------------------------------------------
    def runs(self, playbook: str | None = None, host: str | None = None, failed: bool = False,
             schedule: str | None = None, limit: int = 20, with_tasks: bool = False, *,
             result: str | None = None, offset: int = 0) -> list[RunRow]:
        """Runs newest first, filtered; `with_tasks` loads every task row, otherwise only the
        hosts of runs that never reached a recap are looked up (from their task rows)."""
        where, params = _where(RunFilter(playbook, host, schedule, result, failed))
        if host:  # a host's runs, newest first, from its own index; each run looked up by id
            sql = _SELECT_RUN + " JOIN run_hosts ON run_hosts.run_id = runs.id WHERE " + " AND ".join(where)
            sql += " ORDER BY run_hosts.run_started DESC LIMIT ? OFFSET ?"
        else:
            sql = _SELECT_RUN + ((" WHERE " + " AND ".join(where)) if where else "")
            sql += " ORDER BY started DESC, rowid DESC LIMIT ? OFFSET ?"
        runs = [self._run(r) for r in self.db.execute(sql, [*params, limit, offset])]
        if failed:  # an open row whose controller is gone did not exit 0 either
            runs = [r for r in runs if r.exit_code is not None or r.aborted]
        if with_tasks and runs:
            self._load_tasks(runs)
        elif without_recap := [r for r in runs if not r.recap]:
            self._load_tasks(without_recap)
        return runs

    def durations(self, scan: int = 2000, per_playbook: int = 40) -> dict[str, list[tuple[str, float, float]]]:
        """(run id, start, seconds) of the latest finished runs, oldest first, per playbook."""
        sql = "SELECT id, playbook, started, ended FROM runs WHERE ended IS NOT NULL ORDER BY started DESC LIMIT ?"
        found: dict[str, list[tuple[str, float, float]]] = {}
        for run_id, playbook, started, ended in self.db.execute(sql, (scan,)):
            points = found.setdefault(playbook or "", [])
            if len(points) < per_playbook:
                points.append((run_id, started, max(0.0, ended - started)))
        return {k: v[::-1] for k, v in sorted(found.items())}

    def host_verdicts(self, scan: int = 5000) -> list[HostVerdict]:
        """The latest recap line of every host and playbook among the last `scan` runs."""
        sql = ("SELECT id, playbook, started, recap FROM runs WHERE recap IS NOT NULL AND recap != '{}' "
               "ORDER BY started DESC LIMIT ?")
        seen: dict[tuple[str, str], HostVerdict] = {}
        for run_id, playbook, started, recap in self.db.execute(sql, (scan,)):
            for host, counts in json.loads(recap).items():
                seen.setdefault((host, playbook), HostVerdict(host, playbook, run_id, started, counts))
        return sorted(seen.values(), key=lambda v: (v.host, v.playbook))

    def candidates(self, prefix: str, limit: int = 10) -> list[str]:
        """Run ids that start with `prefix`, newest first."""
        rows = self.db.execute("SELECT id FROM runs WHERE id LIKE ? ORDER BY started DESC LIMIT ?",
                               (_like_prefix(prefix), limit))
        return [r[0] for r in rows]

    def last_run_id(self) -> str | None:
        row = self.db.execute("SELECT id FROM runs ORDER BY started DESC, rowid DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def run(self, run_id: str) -> RunRow | None:
        """A run by id or unique id prefix, with its task results."""
        rows = self.db.execute(f"{_SELECT_RUN} WHERE id LIKE ? LIMIT 2", (_like_prefix(run_id),)).fetchall()
        if len(rows) != 1:
            return None
        run = self._run(rows[0])
        self._load_tasks([run])
        return run

    def _load_tasks(self, runs: list[RunRow]) -> None:
        """Every task result of these runs, in order, in one query."""
        by_id = {r.id: r for r in runs}
        sql = f"{_SELECT_TASKS} WHERE run_id IN ({', '.join('?' * len(by_id))}) ORDER BY run_id, seq"
        for r in self.db.execute(sql, list(by_id)):
            by_id[r[0]].tasks.append(TaskRow(r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]), r[8] or "",
                                             r[9] or "", r[10] or 0.0, r[11] or ""))

    def _run(self, row: tuple[Any, ...]) -> RunRow:
        data = dict(zip(_RUN_COLUMNS, row[:len(_RUN_COLUMNS)], strict=True))
        for key, empty in _JSON_COLUMNS.items():
            data[key] = json.loads(data[key]) if data[key] else empty
        data["git_dirty"] = None if data["git_dirty"] is None else bool(data["git_dirty"])
        data["check_mode"] = bool(data["check_mode"])
        pid, start, machine = row[len(_RUN_COLUMNS):]
        run = RunRow(**data, controller_stamp=ControllerStamp(pid, start, machine or "") if pid else None)
        if run.exit_code is None:
            run.aborted = controller_gone(run.controller_stamp, run.heartbeat, run.started)
        return run


#: What `result` filters on (`history --result`, the dashboard's filter).
RESULTS = ("ok", "failed", "unfinished", "dry-run")


@dataclass(frozen=True)
class RunFilter:
    playbook: str | None = None
    host: str | None = None
    schedule: str | None = None
    result: str | None = None
    failed: bool = False


@dataclass(frozen=True)
class HostVerdict:
    host: str
    playbook: str
    run_id: str
    started: float
    counts: dict[str, int]

    @property
    def verdict(self) -> str:
        if self.counts.get("unreachable"):
            return "unreachable"
        return "failed" if self.counts.get("failed") else "ok"


def _like_prefix(prefix: str) -> str:
    return prefix.replace("%", "").replace("_", "") + "%"


def _where(f: RunFilter) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if f.playbook:
        where.append("(playbook = ? OR playbook LIKE ?)")
        params += [f.playbook, f"%/{f.playbook}"]
    if f.host:  # joined by runs(): the host's rows of run_hosts
        where.append("run_hosts.host = ?")
        params.append(f.host)
    if f.failed:
        where.append("(exit_code IS NULL OR exit_code != 0)")
    if f.schedule:
        where.append("schedule = ?")
        params.append(f.schedule)
    where += {"ok": ["exit_code = 0", "NOT coalesce(check_mode, 0)"],
              "failed": ["exit_code != 0"], "unfinished": ["exit_code IS NULL"],
              "dry-run": ["coalesce(check_mode, 0)"]}.get(f.result or "", [])
    return where, params
