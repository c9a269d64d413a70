"""Controllers of different opsrunner versions sharing one history (docs/history.md).

An older opsrunner is the released code itself, checked out of this repository's history
(`git archive`): schema 4 (10f7a8f, the first with PostgreSQL), schema 5 (fe6720e) and
schema 6 before this change (ad785c9). They set PostgreSQL's version marker back to their
own version whenever they open a newer database. A newer opsrunner is this code with a
ninth migration added (`newer`): one that fails when applied twice, so applying it again
shows. The PostgreSQL is the suite's private cluster (tests/pg.py); an event trigger there
records every DDL statement a controller runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opsrunner.history import migrations
from opsrunner.history.rows import RunRow
from opsrunner.history.store import HistoryStore, open_history
from tests import pg
from tests.conftest import write_yaml
from tests.helpers import ROOT, ProjectEnv

SCHEMA_4, SCHEMA_5 = "10f7a8f", "fe6720e"
#: Schema 6 as released before versions were recorded in opsrunner_schema_versions.
SCHEMA_6_UNRECORDED = "ad785c9"
#: Applied twice, this fails (no IF NOT EXISTS): a newer version's migration run again shows.
INDEX_9 = "CREATE INDEX runs_outcome ON runs(outcome)"

OLD_CLIENT = textwrap.dedent("""
    import sys, time
    from opsrunner.history import migrations
    from opsrunner.history.store import RunRow, open_history
    url, run_id = sys.argv[1], sys.argv[2]
    store = open_history(url)
    store.start_run(RunRow(id=run_id, started=time.time()))
    store.finish_run(run_id, 0, {})
    print(migrations.VERSION, len(store.runs()))
    store.close()
""")


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The opsrunner package as released at each commit, unpacked in a temp dir."""
    trees = {}
    for commit in (SCHEMA_4, SCHEMA_5, SCHEMA_6_UNRECORDED):
        tree = tmp_path_factory.mktemp(f"opsrunner-{commit}")
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "opsrunner"], capture_output=True)
        if archive.returncode != 0:
            pytest.skip(f"no git history to check out opsrunner {commit} from: {archive.stderr.decode()[-200:]}")
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        trees[commit] = tree
    return trees


def old_client(tree: Path, url: str, run_id: str) -> tuple[int, int]:
    """The released opsrunner at `tree` opens the history, records a run and counts the runs
    it lists; its schema version and that count."""
    proc = subprocess.run([sys.executable, "-c", OLD_CLIENT, url, run_id], cwd=tree, env={"PYTHONPATH": str(tree)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    version, count = proc.stdout.split()
    return int(version), int(count)


@contextmanager
def newer(compatible_from: int = 6) -> Iterator[None]:
    """This process as a newer opsrunner: schema 9, whose code of schema `compatible_from`
    and later can still use it."""
    saved = (migrations.SQLITE, migrations.POSTGRES, getattr(migrations, "COMPATIBLE_FROM", ()), migrations.VERSION)
    migrations.SQLITE, migrations.POSTGRES = saved[0] + (INDEX_9,), saved[1] + (INDEX_9,)
    migrations.COMPATIBLE_FROM, migrations.VERSION = saved[2] + (compatible_from,), 9
    try:
        yield
    finally:
        migrations.SQLITE, migrations.POSTGRES, migrations.COMPATIBLE_FROM, migrations.VERSION = saved


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode()).fetchall()


def marker(url: str) -> int:
    [(version,)] = rows(url, "SELECT version FROM opsrunner_schema")
    return int(str(version))


def recorded(url: str) -> list[tuple[object, ...]]:
    return rows(url, "SELECT version, compatible_from, recorded FROM opsrunner_schema_versions ORDER BY version")


def log_ddl(server: pg.PrivatePostgres, url: str) -> None:
    """From now on every DDL statement run in the database at `url` is kept in ddl_log."""
    database = url.rsplit("/", 1)[1]
    server.psql(textwrap.dedent(f"""
        CREATE TABLE ddl_log (n SERIAL, tag TEXT);
        GRANT INSERT ON ddl_log TO {pg.ROLE}; GRANT USAGE ON SEQUENCE ddl_log_n_seq TO {pg.ROLE};
        CREATE FUNCTION log_ddl() RETURNS event_trigger LANGUAGE plpgsql AS
            $$ BEGIN INSERT INTO ddl_log (tag) VALUES (tg_tag); END $$;
        CREATE EVENT TRIGGER log_ddl ON ddl_command_start EXECUTE FUNCTION log_ddl();
    """), database=database)


def ddl_since(server: pg.PrivatePostgres, url: str, start: int) -> list[str]:
    out = server.psql(f"SELECT tag FROM ddl_log WHERE n > {start} ORDER BY n", database=url.rsplit("/", 1)[1])
    return out.splitlines()


def ddl_count(server: pg.PrivatePostgres, url: str) -> int:
    return int(server.psql("SELECT coalesce(max(n), 0) FROM ddl_log", database=url.rsplit("/", 1)[1]))


def record_run(location: str | Path, run_id: str) -> None:
    store = open_history(location)
    store.start_run(RunRow(id=run_id, started=1.0))
    store.finish_run(run_id, 0, {})
    store.close()


def test_released_opsrunner_setting_the_marker_back_reapplies_nothing(
        postgres: pg.PrivatePostgres, pg_url: str, released: dict[str, Path]) -> None:
    """Schema 4 and 5 opsrunner set the marker of a schema 6 database back to theirs; this one
    applies nothing again (no DDL but its bookkeeping), puts the marker back, and its
    read-only dashboard reads the database meanwhile; every controller's runs stay."""
    record_run(pg_url, "today-1")
    log_ddl(postgres, pg_url)
    ids = {"today-1"}
    for n, commit in enumerate((SCHEMA_4, SCHEMA_5)):
        version, listed = old_client(released[commit], pg_url, f"old-{commit}")
        ids.add(f"old-{commit}")
        assert marker(pg_url) == version == 4 + n  # what a released opsrunner does: its own version
        assert listed == len(ids)
        dashboard = HistoryStore(pg_url, read_only=True)
        assert {r.id for r in dashboard.runs()} == ids
        dashboard.close()
        start = ddl_count(postgres, pg_url)
        record_run(pg_url, f"today-{n + 2}")
        ids.add(f"today-{n + 2}")
        assert not [tag for tag in ddl_since(postgres, pg_url, start) if tag != "CREATE TABLE"]
        assert marker(pg_url) == migrations.VERSION
    assert rows(pg_url, "SELECT count(*), count(ended) FROM runs") == [(5, 5)]
    assert [r[:2] for r in recorded(pg_url)] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 4), (6, 4), (7, 4), (8, 4)]
    assert len({r[2] for r in recorded(pg_url)}) == 1  # all recorded at once, none since


def test_a_newer_schema_that_this_version_can_use_is_used_and_never_set_back(
        postgres: pg.PrivatePostgres, pg_url: str, released: dict[str, Path]) -> None:
    """Schema 9 (a newer opsrunner's, usable by schema 8 code): this version writes and reads
    it, its marker stays 9, and the newer opsrunner opens it again without applying its
    migration twice, also after a released opsrunner set the marker back to 4."""
    with newer(compatible_from=4):
        record_run(pg_url, "newer-1")
    assert marker(pg_url) == 9
    record_run(pg_url, "today-1")
    dashboard = HistoryStore(pg_url, read_only=True)
    assert {r.id for r in dashboard.runs()} == {"newer-1", "today-1"}
    dashboard.close()
    assert marker(pg_url) == 9
    old_client(released[SCHEMA_4], pg_url, "old-1")
    assert marker(pg_url) == 4
    log_ddl(postgres, pg_url)
    with newer(compatible_from=4):
        record_run(pg_url, "newer-2")
    assert ddl_since(postgres, pg_url, 0) == ["CREATE TABLE", "CREATE TABLE"]  # IF NOT EXISTS: bookkeeping
    assert marker(pg_url) == 9
    assert [r[:2] for r in recorded(pg_url)][-2:] == [(8, 4), (9, 4)]
    assert rows(pg_url, "SELECT count(*) FROM pg_indexes WHERE indexname = 'runs_outcome'") == [(1,)]
    assert rows(pg_url, "SELECT count(*) FROM runs") == [(4,)]


def test_a_database_at_this_version_needs_no_right_to_create_tables(
        postgres: pg.PrivatePostgres, pg_url: str, released: dict[str, Path]) -> None:
    """A database that schema 6 opsrunner of before this change created (nothing recorded in
    opsrunner_schema_versions), migrated once to this version by its owner (schemas 7 and 8
    add columns), then written by a role that may only read and write rows: this version records
    its runs there, creating nothing."""
    assert old_client(released[SCHEMA_6_UNRECORDED], pg_url, "before-1") == (6, 1)
    record_run(pg_url, "migrated-1")
    database = pg_url.rsplit("/", 1)[1]
    postgres.psql(f"CREATE ROLE rows_only_{database} LOGIN PASSWORD 'rows-only'")
    postgres.psql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO rows_only_{database};"
                  f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO rows_only_{database}", database=database)
    rows_only = pg_url.replace(f"{pg.ROLE}:{pg.PASSWORD}@", f"rows_only_{database}:rows-only@")
    with pytest.raises(Exception, match="permission denied"):
        rows(rows_only, "CREATE TABLE probe (x INTEGER)")
    record_run(rows_only, "today-1")
    assert rows(pg_url, "SELECT id FROM runs ORDER BY id") == [("before-1",), ("migrated-1",), ("today-1",)]


def test_a_newer_schema_that_needs_newer_code_is_refused_naming_both_versions(pg_url: str, tmp_path: Path) -> None:
    """Schema 9 that says schema 9 code or later must use it: this version neither writes nor
    reads it nor touches its marker; the message names both versions; a play still runs (the
    history warns, as for any history that cannot be written)."""
    with newer(compatible_from=9):
        record_run(pg_url, "newer-1")
    message = "schema version 9 needs opsrunner of schema version 9 or later; this opsrunner's is 8: upgrade opsrunner"
    for read_only in (False, True):
        with pytest.raises(Exception, match=message):
            HistoryStore(pg_url, read_only=read_only)
    assert marker(pg_url) == 9
    env = ProjectEnv(tmp_path)
    env.vars["OPSRUNNER_HISTORY"] = pg_url
    write_yaml(env.project / "site.yml", [{"hosts": "localhost", "gather_facts": False,
                                           "tasks": [{"command": "true"}]}])
    listing = env.run("history")
    assert listing.rc != 0 and message in listing.err, listing.err
    play = env.run("play", "site.yml")
    assert play.rc == 0, play.err
    assert "WARNING" in play.err and message in play.err, play.err
    assert rows(pg_url, "SELECT id FROM runs") == [("newer-1",)]
    assert marker(pg_url) == 9


def test_a_newer_schema_without_its_versions_recorded_is_refused(postgres: pg.PrivatePostgres, pg_url: str) -> None:
    """A marker above this version with nothing recorded to say whether this version can use
    the database: refused, not guessed."""
    record_run(pg_url, "today-1")
    postgres.psql("UPDATE opsrunner_schema SET version = 10", database=pg_url.rsplit("/", 1)[1])
    with pytest.raises(Exception, match=r"schema version 10 is newer than this opsrunner's \(8\) and no version "
                                        "recorded says whether schema 8 can use it"):
        open_history(pg_url)


def test_controllers_migrating_at_once_apply_each_version_once(pg_url: str) -> None:
    """Eight controllers of the newer version open a fresh database at the same instant: its
    ninth migration fails if applied twice, and none fails."""
    barrier, errors = threading.Barrier(8), []

    def open_it(n: int) -> None:
        barrier.wait()
        try:
            record_run(pg_url, f"c{n}")
        except Exception as exc:  # collected for the assertion
            errors.append(exc)

    with newer():
        threads = [threading.Thread(target=open_it, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert errors == []
    assert [r[0] for r in recorded(pg_url)] == [1, 2, 3, 4, 5, 6, 7, 8, 9] and marker(pg_url) == 9
    assert rows(pg_url, "SELECT count(*) FROM runs") == [(8,)]


def test_a_migration_waits_for_the_advisory_lock_the_released_versions_take(pg_url: str) -> None:
    """The lock that released opsrunner takes to migrate (pg_advisory_xact_lock 0x6F707372):
    held elsewhere, this version waits for it before touching the schema."""
    import psycopg

    record_run(pg_url, "today-1")
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE opsrunner_schema SET version = 4")  # as a released opsrunner leaves it
        conn.commit()
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x6F707372,))
        done = threading.Event()
        thread = threading.Thread(target=lambda: (record_run(pg_url, "today-2"), done.set()))
        thread.start()
        assert not done.wait(1.0)
        assert marker(pg_url) == 4
        conn.commit()
    thread.join(30)
    assert done.is_set() and marker(pg_url) == 8


def test_postgres_migrations_from_5_on_can_be_applied_again(pg_url: str) -> None:
    """The versions that a released opsrunner's marker could make this one apply again (5, 6:
    before versions were recorded) run twice without error; so must every later one."""
    open_history(pg_url).close()
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for script in migrations.POSTGRES[4:]:
            for statement in migrations.statements(script):
                assert "IF NOT EXISTS" in statement, statement
                conn.execute(statement.encode())


# SQLite: released opsrunner never lowers user_version (it applies nothing above its own);
# the same rules hold for a newer schema and for controllers opening the file at once.

def test_sqlite_released_opsrunner_leaves_a_newer_schema_alone(tmp_path: Path, released: dict[str, Path]) -> None:
    db = tmp_path / "h.db"
    record_run(db, "today-1")
    old_client(released[SCHEMA_4], str(db), "old-1")
    store = HistoryStore(db, read_only=True)
    assert {r.id for r in store.runs()} == {"today-1", "old-1"}
    assert store.db is not None and store.db.execute("PRAGMA user_version").fetchone()[0] == 8
    store.close()


def test_sqlite_newer_schema_used_where_it_says_so_refused_otherwise(tmp_path: Path) -> None:
    usable, needs_newer = tmp_path / "usable.db", tmp_path / "newer.db"
    with newer(compatible_from=5):
        record_run(usable, "newer-1")
    with newer(compatible_from=9):
        record_run(needs_newer, "newer-1")
    record_run(usable, "today-1")
    for read_only in (False, True):
        store = HistoryStore(usable, read_only=read_only)
        assert {r.id for r in store.runs()} == {"newer-1", "today-1"}
        assert store.db is not None and store.db.execute("PRAGMA user_version").fetchone()[0] == 9
        store.close()
        with pytest.raises(Exception, match="schema version 9 needs opsrunner of schema version 9 or later"):
            HistoryStore(needs_newer, read_only=read_only)
    with newer(compatible_from=5):
        record_run(usable, "newer-2")  # its migration not applied again


def test_sqlite_controllers_migrating_at_once_apply_each_version_once(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    barrier, errors = threading.Barrier(6), []

    def open_it(n: int) -> None:
        barrier.wait()
        try:
            record_run(db, f"c{n}")
        except Exception as exc:  # collected for the assertion
            errors.append(exc)

    with newer():
        threads = [threading.Thread(target=open_it, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        store = HistoryStore(db)
        assert store.db is not None
        assert [r[0] for r in store.db.execute("SELECT version FROM opsrunner_schema_versions")] == list(range(1, 10))
        assert len(store.runs()) == 6
        store.close()
