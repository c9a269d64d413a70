"""Pure logic of the history package: what counts as secret, masking, schema versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from opsrunner.history.masking import MASK, is_secret_name, mask_text, mask_vars, secret_values
from opsrunner.history.store import MIGRATIONS, HistoryStore, RunRow


def test_secret_names() -> None:
    for name in ("password", "DB_PASSWORD", "ssh_passwd", "client_secret", "hf_token", "openai_api_key"):
        assert is_secret_name(name), name
    for name in ("user", "pass", "username", "api", "keyfile"):
        assert not is_secret_name(name), name


def test_mask_vars_and_text_nested() -> None:
    extra = {"db": {"password": "hunter22", "host": "db1"}, "api_token": "abc123", "steps": 10}
    assert mask_vars(extra) == {"db": {"password": MASK, "host": "db1"}, "api_token": MASK, "steps": 10}
    values = secret_values(extra)
    assert values == ["hunter22", "abc123"]
    assert mask_text("login hunter22 with abc123 at db1", values) == f"login {MASK} with {MASK} at db1"


def test_schema_version_is_recorded_and_migrations_run_once(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store = HistoryStore(db)
    store.start_run(RunRow(id="r1", started=1.0))
    store.close()
    again = HistoryStore(db)  # opening an up-to-date database changes nothing
    assert again.run("r1") is not None
    again.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
