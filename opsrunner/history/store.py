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

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("tasks", "controller_stamp", "aborted")}
        stamp = self.controller_stamp
        data["controller_pid"] = stamp.pid if stamp else None
        data["result"] = self.result
        data["tasks"] = [t.__dict__ for t in self.tasks]
        return data


_RUN_COLUMNS = ("id", "started", "ended", "user", "controller", "command", "cwd", "playbook", "git_commit",
                "git_dirty", "inventory", "extra_vars", "schedule", "exit_code", "recap", "notes", "heartbeat",
                "current_task")
_STAMP_COLUMNS = ("controller_pid", "controller_start", "controller_machine")
_SELECT_RUN = f"SELECT {', '.join(_RUN_COLUMNS + _STAMP_COLUMNS)} FROM runs"
_SELECT_TASKS = ("SELECT run_id, play, task, module, host, status, changed, handler, msg, diagnosis, duration "
                 "FROM results")
_JSON_COLUMNS: dict[str, Any] = {"inventory": [], "extra_vars": {}, "recap": {}, "notes": []}


class HistoryStore:
    def __init__(self, path: Path, busy_timeout_s: float = 30.0) -> None:
        self.path = path
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
            self.db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(run_id, seq, row.play, row.task, row.module, row.host, row.status,
                                  int(row.changed), int(row.handler), row.msg, row.diagnosis, row.duration)
                                 for seq, row in rows])

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
            self.db.execute("DELETE FROM runs WHERE started < ?", (cutoff,))
        return len(ids)

    # -- reads ------------------------------------------------------------------------------
    def runs(self, playbook: str | None = None, host: str | None = None, failed: bool = False,
             schedule: str | None = None, limit: int = 20, with_tasks: bool = False) -> list[RunRow]:
        where, params = [], []
        if playbook:
            where.append("(playbook = ? OR playbook LIKE ?)")
            params += [playbook, f"%/{playbook}"]
        if host:
            where.append("id IN (SELECT run_id FROM results WHERE host = ?)")
            params.append(host)
        if failed:
            where.append("(exit_code IS NULL OR exit_code != 0)")
        if schedule:
            where.append("schedule = ?")
            params.append(schedule)
        sql = _SELECT_RUN + ((" WHERE " + " AND ".join(where)) if where else "")
        sql += " ORDER BY started DESC, rowid DESC LIMIT ?"
        runs = [self._run(r) for r in self.db.execute(sql, [*params, limit])]
        if failed:  # an open row whose controller is gone did not exit 0 either
            runs = [r for r in runs if r.exit_code is not None or r.aborted]
        if with_tasks and runs:
            self._load_tasks(runs)
        return runs

    def run(self, run_id: str) -> RunRow | None:
        """A run by id or unique id prefix, with its task results."""
        rows = self.db.execute(f"{_SELECT_RUN} WHERE id LIKE ? LIMIT 2",
                               (run_id.replace("%", "") + "%",)).fetchall()
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
                                             r[9] or "", r[10] or 0.0))

    def _run(self, row: tuple[Any, ...]) -> RunRow:
        data = dict(zip(_RUN_COLUMNS, row[:len(_RUN_COLUMNS)], strict=True))
        for key, empty in _JSON_COLUMNS.items():
            data[key] = json.loads(data[key]) if data[key] else empty
        data["git_dirty"] = None if data["git_dirty"] is None else bool(data["git_dirty"])
        pid, start, machine = row[len(_RUN_COLUMNS):]
        run = RunRow(**data, controller_stamp=ControllerStamp(pid, start, machine or "") if pid else None)
        if run.exit_code is None:
            run.aborted = controller_gone(run.controller_stamp, run.heartbeat, run.started)
        return run
