"""What a history store needs of a database: the one seam between HistoryStore and SQL
dialects (sqlite_backend.py, postgres_backend.py).

Queries are written once, with `?` placeholders; a backend runs them in its dialect."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class NoHistory(Exception):
    """A history that no run has created yet (no such SQLite file; a PostgreSQL database without
    opsrunner's schema), opened by a reader that creates none: `history`, `show`, `prune`,
    `serve`. Only a run that records (`play`, `schedule run`) creates one."""


class Backend(Protocol):
    #: Where the database is, as messages show it (a URL's password masked).
    shown: str
    #: The column that orders runs started in the same instant by insertion.
    insertion_order: str
    #: Appended to a SELECT that reads a row to rewrite it (PostgreSQL: FOR UPDATE).
    for_update: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; the rows of a query, [] otherwise."""

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def transaction(self, lock: bool = False) -> AbstractContextManager[None]:
        """One transaction; `lock`: writers wait for each other from its start (SQLite's
        BEGIN IMMEDIATE; PostgreSQL rows lock themselves)."""

    def insert_ignore(self, table: str, rest: str) -> str:
        """INSERT INTO `table` `rest`, doing nothing for a row whose key exists."""

    def close(self) -> None: ...
