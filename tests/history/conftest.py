"""The private PostgreSQL cluster of the shared-history tests (tests/pg.py), one per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import pg


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg.PrivatePostgres]:
    from tests import procguard

    try:
        with procguard.outside_test():
            server = pg.start_postgres()
    except pg.PostgresUnavailable as exc:
        if pg.MODE == "require":
            pytest.fail(f"PostgreSQL required (OPSRUNNER_TEST_POSTGRES=require) but unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    procguard.exempt(server.pid)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres: pg.PrivatePostgres, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database of the private cluster for one test: its URL, with the password."""
    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return postgres.new_database(name)
