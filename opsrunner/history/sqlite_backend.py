"""The default history backend: stdlib sqlite3 in WAL mode, a file readable by its owner only.

Each write is one short transaction, so parallel runs (a timer and a person) interleave
safely; readers never block writers."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opsrunner.history import migrations
from opsrunner.history.backend import NoHistory


class SchemaMismatch(sqlite3.OperationalError):
    """A database whose schema this opsrunner cannot use (a newer one that says so, or an
    older one opened read-only)."""


class SQLiteBackend:
    insertion_order = "rowid"
    for_update = ""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0, read_only: bool = False,
                 create: bool = True) -> None:
        """`read_only`: a reader that never writes (the dashboard); the database must exist
        at the current schema version or a newer one that this version can use (open it once
        writable to migrate it). `create`: a missing file is created (else NoHistory)."""
        self.path = path
        self.shown = str(path)
        if (read_only or not create) and not path.exists():
            raise NoHistory("no such file")
        if read_only:
            self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s,
                                      isolation_level=None, check_same_thread=False)
            try:
                if not self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    # made by a run that has not written its schema yet: no run recorded there so far
                    raise NoHistory("no run has recorded there yet")
                found = self._found()
                refusal = found.refusal()
                if refusal is None and found.version < migrations.VERSION:
                    refusal = f"schema version {found.version}, expected {migrations.VERSION}"
                if refusal is not None:
                    raise SchemaMismatch(refusal)
            except BaseException:
                self.db.close()
                raise
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
        try:
            self._migrate()
        except BaseException:
            self.db.close()
            raise

    @classmethod
    def empty(cls, shown: str) -> SQLiteBackend:
        """A history with no run, in memory: what the dashboard reads of one that no run has
        created yet (`shown`: where it will be); a reader creates none."""
        backend = cls.__new__(cls)
        backend.path, backend.shown = Path(shown), shown
        backend.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        backend._migrate()
        return backend

    def _found(self) -> migrations.Found:
        return _found(self.db)

    def _migrate(self) -> None:
        """The same rules as PostgreSQL's (migrations.py): in one BEGIN IMMEDIATE transaction
        (controllers opening it at once wait for each other), the versions missing are applied;
        user_version only moves up; a newer schema is used where it says this version can."""
        with self.transaction(lock=True):
            found = self._found()
            refusal = found.refusal()
            if refusal is not None:
                raise SchemaMismatch(refusal)
            if found.marker == found.version >= migrations.VERSION:  # nothing to apply: nothing written
                return
            self.db.execute(migrations.SQLITE_VERSIONS_TABLE)
            for number, script in enumerate(migrations.SQLITE[found.version:], start=found.version + 1):
                for statement in migrations.statements(script):
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {number}")
            now = time.time()
            for number in found.missing():
                self.db.execute(f"INSERT OR IGNORE INTO {migrations.VERSIONS_TABLE} VALUES (?, ?, ?)",
                                (number, migrations.COMPATIBLE_FROM[number - 1], now))
            if found.marker < found.version:
                self.db.execute(f"PRAGMA user_version = {max(found.version, migrations.VERSION)}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.db.executemany(sql, rows)

    @contextmanager
    def transaction(self, lock: bool = False) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def insert_ignore(self, table: str, rest: str) -> str:
        return f"INSERT OR IGNORE INTO {table} {rest}"

    def close(self) -> None:
        self.db.close()


def _found(db: sqlite3.Connection) -> migrations.Found:
    marker = int(db.execute("PRAGMA user_version").fetchone()[0])
    recorded, needs = 0, None
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                  (migrations.VERSIONS_TABLE,)).fetchone():
        row = db.execute(migrations.SELECT_RECORDED).fetchone()
        if row[0] is not None:
            recorded, needs = int(row[0]), int(row[1])
    return migrations.Found(marker, recorded, needs)


def unusable(path: Path) -> str | None:
    """Why an existing file cannot be opsrunner's run history (not a SQLite database, another
    program's, a schema this opsrunner refuses); None where it can be, or does not exist yet.
    Read only: nothing is created or migrated. Without a -wal beside it the file holds every
    commit, so it is read as immutable (no -wal or -shm made); with both, read only. A -wal
    without its -shm (a crash, a copy) cannot be read without SQLite creating the -shm, owned
    by whoever reads: not checked here (the run itself warns if it cannot record)."""
    if not path.exists():
        return None
    if path.is_dir():
        return "a directory, not a SQLite file"
    wal, shm = Path(f"{path}-wal").exists(), Path(f"{path}-shm").exists()
    if wal and not shm:
        return None
    mode = "ro" if wal else "ro&immutable=1"
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        return f"cannot be opened ({type(exc).__name__}: {exc})"
    try:
        found = _found(db)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    except sqlite3.Error as exc:
        return f"not a SQLite database opsrunner can read ({type(exc).__name__}: {exc})"
    finally:
        db.close()
    if found.version == 0 and tables:  # every opsrunner version sets user_version with its tables
        return f"a SQLite database, but not an opsrunner run history (its tables: {', '.join(tables[:5])})"
    return found.refusal()
