"""Pure logic of the history package: what counts as secret, masking, schema versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from opsrunner.history.store import MIGRATIONS, HistoryStore, RunRow
from opsrunner.secrets import MASK, Masker, is_secret_name


def test_secret_names() -> None:
    for name in ("password", "DB_PASSWORD", "ssh_passwd", "client_secret", "hf_token", "openai_api_key"):
        assert is_secret_name(name), name
    for name in ("user", "pass", "username", "api", "keyfile"):
        assert not is_secret_name(name), name


def test_mask_vars_and_text_nested() -> None:
    """What history stores of -e: secret-named values hidden whole (even short), their values
    masked wherever else they appear."""
    extra = {"db": {"password": "hunter22", "host": "db1"}, "api_token": "abc123", "steps": 10, "pin": "7",
             "users": [{"name": "a", "password": "ab"}]}
    masker = Masker()
    masker.add_vars(extra)
    assert masker.mask_vars(extra) == {"db": {"password": MASK, "host": "db1"}, "api_token": MASK, "steps": 10,
                                       "pin": "7", "users": [{"name": "a", "password": MASK}]}
    assert masker.mask("login hunter22 with abc123 at db1") == f"login {MASK} with {MASK} at db1"


def test_secret_name_patterns_of_the_run_hide_by_name() -> None:
    """A run whose variables set secret_name_patterns: values of those names are hidden too,
    in the vars and in the command line, however short."""
    extra = {"secret_name_patterns": ["*_pin"], "deploy_pin": "42", "steps": "100"}
    masker = Masker()
    masker.add_vars(extra)
    assert masker.mask_vars(extra)["deploy_pin"] == MASK
    assert masker.mask_vars(extra)["steps"] == "100"
    assert masker.mask_argv(["play", "pb.yml", "-e", "deploy_pin=42", "-e", "steps=100"]) == \
        ["play", "pb.yml", "-e", f"deploy_pin={MASK}", "-e", "steps=100"]


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


def test_the_command_line_hides_short_secrets_in_every_form_of_e() -> None:
    """What history records of the command line: every secret-named value hidden, whatever
    its length and whichever form -e takes; other values and words left as they are."""
    masker = Masker()
    masker.add_vars({"db_password": "42", "api_token": "zz"})
    argv = ["play", "p.yml", "-e", "env=prod db_password=42", "--extra-vars=api_token=zz",
            "-e", '{"api_token": "zz", "steps": 42}', "-e", "{api_token: zz, b: 2}", "-e", "password='a b' c=1",
            "-l", "http://host:42/"]
    assert masker.mask_argv(argv) == [
        "play", "p.yml", "-e", f"env=prod db_password={MASK}", f"--extra-vars=api_token={MASK}",
        "-e", f'{{"api_token": "{MASK}", "steps": 42}}', "-e", f"{{api_token: {MASK}, b: 2}}",
        "-e", f"password='{MASK}' c=1", "-l", "http://host:42/"]


def test_a_version_2_database_is_migrated_with_the_hosts_of_its_runs(tmp_path: Path) -> None:
    """Schema 3 fills run_hosts from the task rows already recorded: the host filter finds old runs."""
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        for script in MIGRATIONS[:2]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 2")
        for n, host in ((1, "web1"), (2, "web2"), (3, "web1")):
            conn.execute("INSERT INTO runs (id, started, exit_code, recap) VALUES (?, ?, 0, '{}')", (f"r{n}", n))
            conn.execute("INSERT INTO results (run_id, seq, task, host, status) VALUES (?, 1, 't', ?, 'ok')",
                         (f"r{n}", host))
    store = HistoryStore(db)
    assert [r.id for r in store.runs(host="web1")] == ["r3", "r1"]
    assert [r.id for r in store.runs(host="web2")] == ["r2"] and store.runs(host="web3") == []
    assert store.run("r2") is not None and store.run("r2").tasks[0].log_tail == ""  # type: ignore[union-attr]
    assert store.prune(0) == 3 and store.runs(host="web1") == []
    store.close()
    reader = HistoryStore(db, read_only=True)
    assert reader.runs() == []
    reader.close()


def test_a_version_3_database_migrates_to_run_groups_keeping_its_runs(tmp_path: Path) -> None:
    """A file written before scale-out (schema 3) gains the run group and slice columns; its
    runs read as ungrouped, new runs record their group."""
    db = tmp_path / "v3.db"
    with sqlite3.connect(db) as conn:
        for script in MIGRATIONS[:3]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 3")
        conn.execute("INSERT INTO runs (id, started, exit_code, recap) VALUES ('old', 1, 0, '{}')")
    store = HistoryStore(db)
    store.start_run(RunRow(id="new", started=2.0, run_group="g", slice="2/3"))
    assert [(r.id, r.run_group, r.slice) for r in store.runs()] == [("new", "g", "2/3"), ("old", None, None)]
    assert [r.id for r in store.runs(group="g")] == ["new"] and [r.id for r in store.group_runs("g")] == ["new"]
    store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 4


def test_history_locations_mask_a_url_password_everywhere() -> None:
    from opsrunner.history.location import display, is_postgres, passwords_of, scrub

    url = "postgresql://ops:p%40ss-W0rd@db.internal:5432/hist?sslmode=require&password=other-Secret"
    assert is_postgres(url) and not is_postgres("/var/lib/h.db") and not is_postgres("postgresql.db")
    assert display(url) == "postgresql://ops:***@db.internal:5432/hist?sslmode=require&password=***"
    assert passwords_of(url) == ["p%40ss-W0rd", "other-Secret", "p@ss-W0rd"]
    text = scrub(f"--history={url} and postgres://x:y@h/d", url)
    assert "W0rd" not in text and "other-Secret" not in text and "x:***@h/d" in text
    assert display("postgresql://ops@db:5432/hist") == "postgresql://ops@db:5432/hist"


def test_a_sqlite_history_never_imports_psycopg(tmp_path: Path) -> None:
    """Startup time: the driver is imported only for a postgresql:// history."""
    import subprocess
    import sys

    db = str(tmp_path / "h.db")
    code = ("import sys; from opsrunner.cli import main; from opsrunner.history.store import open_history; "
            f"open_history({db!r}).close(); main(['history', '--history', {db!r}]); print('psycopg' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
