"""A history shared by many controllers: PostgreSQL through psycopg 3 (the `postgresql` extra).

Imported only for a postgresql:// location. Every write is one transaction of its own run's
rows, so controllers writing at once never conflict; the schema is migrated on first use
under an advisory lock, so controllers starting at once migrate it once. Its version only
moves up (migrations.py: controllers of different versions share one database)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from opsrunner.history import migrations
from opsrunner.history.backend import NoHistory
from opsrunner.history.location import display

#: pg_advisory_xact_lock key of the schema migration ("opsr" in ASCII).
_MIGRATION_LOCK = 0x6F707372
_CONNECT_TIMEOUT_S = 5


class SchemaMismatch(psycopg.Error):
    pass


class PostgresBackend:
    insertion_order = "ord"
    for_update = " FOR UPDATE"

    def __init__(self, url: str, busy_timeout_s: float = 30.0, read_only: bool = False,
                 create: bool = True) -> None:
        self.shown = display(url)
        # libpq reads what the URL leaves out from PGPASSWORD, PGPASSFILE, PGSSLMODE...
        self.db = psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S,
                                  application_name="opsrunner")
        # A write waits this long for a lock, then fails (the recorder warns, the run goes on).
        self.db.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
        try:
            if (read_only or not create) and self._found() == migrations.Found(0, 0, None):
                # a reader's URL naming another database: its schema is created by a run only
                raise NoHistory(f"no opsrunner history in this database (schema version 0, expected "
                                f"{migrations.VERSION}: no opsrunner_schema table)")
            if read_only:
                self.db.execute("SET default_transaction_read_only = on")
                self._check(self._found(), read_only=True)
            else:
                self._migrate()
        except BaseException:
            self.db.close()
            raise

    def _found(self) -> migrations.Found:
        marker = recorded = 0
        needs = None
        row = self.db.execute("SELECT to_regclass('opsrunner_schema') IS NOT NULL, to_regclass(%s) IS NOT NULL",
                              (migrations.VERSIONS_TABLE,)).fetchone()
        has_marker, has_versions = row if row else (False, False)
        if has_marker:
            row = self.db.execute("SELECT max(version) FROM opsrunner_schema").fetchone()
            marker = int(row[0]) if row and row[0] is not None else 0
        if has_versions:
            row = self.db.execute(migrations.SELECT_RECORDED).fetchone()
            if row and row[0] is not None:
                recorded, needs = int(row[0]), int(row[1])
        return migrations.Found(marker, recorded, needs)

    def _check(self, found: migrations.Found, read_only: bool = False) -> None:
        refusal = found.refusal()
        if refusal is None and read_only and found.version < migrations.VERSION:
            refusal = f"schema version {found.version}, expected {migrations.VERSION}"
        if refusal is not None:
            raise SchemaMismatch(refusal)

    def _migrate(self) -> None:
        """Brings the schema to this version, once however many controllers start at once: under
        an advisory lock (opsrunner released before this takes it too), the versions found are
        read again and only those missing applied. The marker only moves up: set back by an
        older opsrunner, it is put back; a newer schema is left as it is, used where it says
        this version can (Found.refusal), refused otherwise. A database at this version already
        is only read (its user may lack the right to create tables)."""
        found = self._found()
        if found.marker == found.version >= migrations.VERSION:  # nothing to apply, nothing set back
            self._check(found)
            return
        with self.db.transaction():
            self.db.execute(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
            self.db.execute("CREATE TABLE IF NOT EXISTS opsrunner_schema (version INTEGER NOT NULL)")
            self.db.execute(migrations.POSTGRES_VERSIONS_TABLE)
            found = self._found()
            self._check(found)
            for script in migrations.POSTGRES[found.version:]:
                for statement in migrations.statements(script):
                    self.db.execute(statement.encode())
            now = time.time()
            for number in found.missing():
                self.db.execute(f"INSERT INTO {migrations.VERSIONS_TABLE} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                                (number, migrations.COMPATIBLE_FROM[number - 1], now))
            version = max(found.version, migrations.VERSION)
            if self.db.execute("SELECT version FROM opsrunner_schema").fetchall() != [(version,)]:
                self.db.execute("DELETE FROM opsrunner_schema")
                self.db.execute("INSERT INTO opsrunner_schema VALUES (%s)", (version,))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.db.execute(_dialect(sql), params)
        return cursor.fetchall() if cursor.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.db.cursor() as cursor:
            cursor.executemany(_dialect(sql), rows)

    @contextmanager
    def transaction(self, lock: bool = False) -> Iterator[None]:
        with self.db.transaction():
            yield

    def insert_ignore(self, table: str, rest: str) -> str:
        return f"INSERT INTO {table} {rest} ON CONFLICT DO NOTHING"

    def close(self) -> None:
        self.db.close()


def _dialect(sql: str) -> bytes:
    """The store's `?` placeholders as psycopg's; no query of the store has a literal ? or %."""
    return sql.replace("?", "%s").encode()
