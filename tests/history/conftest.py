"""A fresh database of the private PostgreSQL cluster (tests/conftest.py's `postgres`) per test."""

from __future__ import annotations

import pytest

from tests import pg


@pytest.fixture
def pg_url(postgres: pg.PrivatePostgres, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database of the private cluster for one test: its URL, with the password."""
    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return postgres.new_database(name)
