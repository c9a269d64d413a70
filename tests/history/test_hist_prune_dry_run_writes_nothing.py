"""`opsrunner history prune --dry-run` writes nothing: a mistyped --history is refused, not
created; an existing history is only read (no schema migrated, no outcome kept beside it
recorded), its file's bytes and mtime as they were."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from opsrunner.history import migrations, outcomes
from opsrunner.history.rows import row_fields
from opsrunner.history.store import HistoryStore, RunRow
from tests.helpers import cli
from tests.history.test_hist_prune_dry_run import _dead_stamp


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_a_dry_run_on_a_missing_file_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    for typo in (tmp_path / "typo.db", tmp_path / "nodir" / "typo.db"):
        dry = cli("history", "prune", "--keep-days", "5", "--dry-run", "--history", str(typo))
        assert (dry.rc, dry.out) == (1, "")
        assert dry.err == f"ERROR: cannot read the run history {typo}: no such file (a dry run creates none)\n"
    assert list(tmp_path.iterdir()) == []


def test_a_dry_run_leaves_an_outcome_kept_beside_the_history_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store = HistoryStore(db)
    stamp = _dead_stamp()
    run = RunRow(id="ended-on-a-full-disk", started=time.time() - 20 * 86400, playbook="/p/site.yml")
    store.start_run(run, stamp)
    store.close()
    reservation = outcomes.Reservation.make(str(db), run.id)
    assert reservation is not None
    ended = RunRow(id=run.id, started=run.started, playbook=run.playbook, ended=run.started + 5, exit_code=0)
    assert reservation.keep(row_fields(ended, stamp))
    before, kept = _state(db), reservation.path.read_bytes()
    time.sleep(0.01)  # a write now would show in the mtime

    dry = cli("history", "prune", "--keep-days", "5", "--dry-run", "--history", str(db))
    assert dry.rc == 0, dry.err
    assert dry.out.startswith(f"would remove 1 run(s) older than 5 days from {db} (dry run: nothing deleted)\n")
    assert _state(db) == before
    assert reservation.path.read_bytes() == kept  # still there, for the next writer to record
    writer = HistoryStore(db)  # a writer records it
    assert writer.run(run.id).exit_code == 0  # type: ignore[union-attr]
    assert not reservation.path.exists()
    writer.close()


def test_a_dry_run_on_an_older_schema_is_refused_and_migrates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with sqlite3.connect(db) as conn:  # the schema of an older opsrunner (version 5)
        for script in migrations.SQLITE[:5]:
            for statement in migrations.statements(script):
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 5")
    conn.close()
    before = _state(db)
    time.sleep(0.01)

    dry = cli("history", "prune", "--keep-days", "5", "-C", "--history", str(db))
    assert (dry.rc, dry.out) == (1, "")
    assert dry.err == (f"ERROR: cannot read the run history {db}: SchemaMismatch: schema version 5, expected "
                       f"{migrations.VERSION} (a dry run does not migrate it: `opsrunner history` does)\n")
    assert _state(db) == before
    assert cli("history", "--history", str(db)).rc == 0  # which migrates it
    assert _state(db) != before
