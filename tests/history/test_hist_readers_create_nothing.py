"""A reader of the run history creates none: `history` (and `--json`), `show`, `history prune`
and `serve` on a history that does not exist (a mistyped --history, no run recorded yet) say
so, naming it, exit 1 (cannot read the history) and leave no file (the dashboard says so and
shows no run until one records); a PostgreSQL database without opsrunner's schema gets no
tables. Only a run that records creates the history."""

from __future__ import annotations

from pathlib import Path

from opsrunner.history import migrations
from tests.helpers import cli, cli_subprocess

CREATES = "only a run creates it: opsrunner play, schedule run"


def test_history_show_and_prune_of_a_missing_file_are_refused_and_create_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo.db"
    for args in (["history"], ["history", "--json"], ["history", "prune", "--keep-days", "0"],
                 ["show", "last"], ["show", "20261201-014202-f526a91d"]):
        res = cli(*args, "--history", str(typo))
        assert (res.rc, res.out) == (1, ""), args
        assert res.err == f"ERROR: cannot read the run history {typo}: no such file ({CREATES})\n", args
    assert list(tmp_path.iterdir()) == []


def test_the_default_history_of_a_fresh_user_is_not_created_by_a_reader(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": str(state), "OPSRUNNER_HISTORY": ""}
    res = cli_subprocess("history", env=env, cwd=tmp_path)
    assert res.rc == 1
    assert res.err == (f"ERROR: cannot read the run history {state / 'opsrunner' / 'history.db'}: no such file "
                       f"({CREATES})\n")
    assert not state.exists()


def test_serve_of_a_missing_file_says_so_creates_nothing_and_shows_the_runs_once_one_records(tmp_path: Path) -> None:
    from tests.web.dashboard import Project, serving

    project = Project(tmp_path)
    with serving(project) as server:
        assert server.get("/api/runs").json()["runs"] == []
        assert server.get("/").status == 200
        assert not project.db.exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("history")] == []
        run_id = project.play("-l", "web1")  # the run creates it; the dashboard shows it
        assert [r["id"] for r in server.get("/api/runs").json()["runs"]] == [run_id]


def test_serve_names_the_missing_history_in_its_first_line(tmp_path: Path) -> None:
    from tests.helpers import opsrunner_process

    typo = tmp_path / "typo.db"
    with opsrunner_process("serve", "--port", "0", "--history", str(typo), cwd=tmp_path) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()
    assert f"(history {typo}, which does not exist (no such file): no run is shown until a run records there)" \
        in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_reader_of_a_postgres_database_without_the_schema_creates_no_table(pg_url: str) -> None:
    import psycopg

    from tests import pg

    shown = pg_url.replace(f":{pg.PASSWORD}@", ":***@")
    why = f"no opsrunner history in this database (schema version 0, expected {migrations.VERSION}: no " \
          "opsrunner_schema table)"
    for args, creates in ((["history"], CREATES), (["show", "last"], CREATES),
                          (["history", "prune", "--keep-days", "0"], CREATES),
                          (["history", "prune", "--keep-days", "0", "--dry-run"], "a dry run creates none")):
        res = cli(*args, "--history", pg_url)
        assert (res.rc, res.out) == (1, ""), args
        assert res.err == f"ERROR: cannot read the run history {shown}: {why} ({creates})\n", args
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)


def test_a_history_file_a_run_has_made_but_not_yet_filled_reads_as_none(tmp_path: Path) -> None:
    """A run creates the file, then its schema: a read-only reader between the two (the
    dashboard, started before the first run) sees no history yet, not a schema mismatch (its
    /api/runs answered an error, with no runs)."""
    import sqlite3

    import pytest

    from opsrunner.history.backend import NoHistory
    from opsrunner.history.store import HistoryStore

    db = tmp_path / "h.db"
    sqlite3.connect(db).close()  # as a run's first connect leaves it, before its schema
    with pytest.raises(NoHistory, match="no run has recorded there yet"):
        HistoryStore(str(db), read_only=True)
