"""A history shared by many controllers: PostgreSQL through psycopg 3 (the `postgresql` extra).

Imported only for a postgresql:// location. Every write is one transaction of its own run's
rows, so controllers writing at once never conflict; the schema is migrated on first use
under an advisory lock, so controllers starting at once migrate it once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from opsrunner.history import migrations
from opsrunner.history.location import display

#: pg_advisory_xact_lock key of the schema migration ("opsr" in ASCII).
_MIGRATION_LOCK = 0x6F707372
_CONNECT_TIMEOUT_S = 5


class SchemaMismatch(psycopg.Error):
    pass


class PostgresBackend:
    insertion_order = "ord"
    for_update = " FOR UPDATE"

    def __init__(self, url: str, busy_timeout_s: float = 30.0, read_only: bool = False) -> None:
        self.shown = display(url)
        # libpq reads what the URL leaves out from PGPASSWORD, PGPASSFILE, PGSSLMODE...
        self.db = psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S,
                                  application_name="opsrunner")
        # A write waits this long for a lock, then fails (the recorder warns, the run goes on).
        self.db.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
        if read_only:
            self.db.execute("SET default_transaction_read_only = on")
            version = self._version()
            if version != migrations.VERSION:
                self.db.close()
                raise SchemaMismatch(f"schema version {version}, expected {migrations.VERSION}")
            return
        self._migrate()

    def _version(self) -> int:
        exists = self.db.execute("SELECT to_regclass('opsrunner_schema')").fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = self.db.execute("SELECT version FROM opsrunner_schema").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        if self._version() == migrations.VERSION:
            return
        with self.db.transaction():
            self.db.execute(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
            self.db.execute("CREATE TABLE IF NOT EXISTS opsrunner_schema (version INTEGER NOT NULL)")
            version = self._version()
            for script in migrations.POSTGRES[version:]:
                for statement in migrations.statements(script):
                    self.db.execute(statement.encode())
            self.db.execute("DELETE FROM opsrunner_schema")
            self.db.execute("INSERT INTO opsrunner_schema VALUES (%s)", (migrations.VERSION,))

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
