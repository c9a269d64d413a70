"""`opsrunner history prune --keep-days N --dry-run` (or `-C`/`--check`, as in Ansible) lists
the runs that prune would delete, as `opsrunner history` lists runs, and deletes nothing: a
real prune after it deletes those runs, no other. Runs that may still be going on are kept by
both, and counted. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from opsrunner.history.liveness import ControllerStamp, machine_key, start_ticks
from opsrunner.history.store import HistoryStore, RunRow, TaskRow
from tests.helpers import cli

HEADER = "RUN ID  STARTED  DURATION  RESULT  HOSTS  PLAYBOOK  SCHEDULE  GROUP  COMMIT"


def _dead_stamp() -> ControllerStamp:
    """The stamp of a controller that is gone: a process of this machine, exited and reaped."""
    child = subprocess.Popen(["true"])
    stamp = ControllerStamp(child.pid, start_ticks(child.pid) or 1, machine_key())
    child.wait()
    return stamp


def _record(store: HistoryStore, runs: int, days_ago: float) -> list[str]:
    """`runs` finished runs started `days_ago` days ago, a second apart, oldest first: their ids."""
    ids = []
    for i in range(runs):
        run_id = f"{days_ago:g}d-{i:03d}"
        store.start_run(RunRow(id=run_id, started=time.time() - days_ago * 86400 + i, playbook="/p/site.yml"),
                        ControllerStamp.of_this_process())
        store.add_tasks(run_id, [(1, TaskRow("p", "t", "command", "h1", "ok", False, False, "", "", 0.1))])
        store.finish_run(run_id, 0, {"h1": {"ok": 1}})
        ids.append(run_id)
    return ids


def _listed(out: str) -> list[str]:
    """The run ids of a table as `opsrunner history` writes it."""
    lines = out.splitlines()
    at = lines.index(next(ln for ln in lines if ln.split() == HEADER.split()))
    return [ln.split()[0] for ln in lines[at + 1:] if not ln.startswith("...")]


def _everything(location: str) -> str:
    out = cli("history", "--json", "-n", "1000", "--history", location)
    assert out.rc == 0, out.err
    return out.out


def _dry_run_lists_what_prune_then_deletes(location: str, shown: str) -> None:
    store = HistoryStore(location)
    old = _record(store, 3, days_ago=10)
    recent = _record(store, 2, days_ago=1)
    for run_id, stamp in (("live-open", ControllerStamp.of_this_process()), ("dead-open", _dead_stamp())):
        store.start_run(RunRow(id=run_id, started=time.time() - 20 * 86400, playbook="/p/site.yml"), stamp)
    store.close()
    before = _everything(location)

    dry = cli("history", "prune", "--keep-days", "5", "--dry-run", "--history", location)
    assert dry.rc == 0, dry.err
    first, header, *rows = dry.out.splitlines()
    assert first == f"would remove 4 run(s) older than 5 days from {shown}; would keep 1 still running " \
        "(dry run: nothing deleted)"
    assert header.split() == HEADER.split() and len(rows) == 4
    assert _listed(dry.out) == [*old[::-1], "dead-open"]  # newest first, as `opsrunner history`
    assert "aborted (controller gone)" in rows[-1] and "ok (0)" in rows[0]
    assert _everything(location) == before  # nothing deleted, nothing touched
    assert cli("history", "prune", "--keep-days", "5", "--check", "--history", location).out == dry.out

    real = cli("history", "prune", "--keep-days", "5", "--history", location)
    assert real.out == f"removed 4 run(s) older than 5 days from {shown}; kept 1 still running\n", real.err
    left = [run["id"] for run in json.loads(_everything(location))]
    assert sorted(left) == sorted([*recent, "live-open"])
    assert {run["id"] for run in json.loads(before)} - set(left) == set(_listed(dry.out))  # those listed, only


def test_dry_run_lists_what_prune_then_deletes_sqlite(tmp_path: Path) -> None:
    _dry_run_lists_what_prune_then_deletes(str(tmp_path / "h.db"), str(tmp_path / "h.db"))


def test_dry_run_lists_what_prune_then_deletes_postgres(pg_url: str) -> None:
    shown = HistoryStore(pg_url).path
    assert "pg-S3cret" not in shown
    _dry_run_lists_what_prune_then_deletes(pg_url, shown)


def test_a_long_dry_run_shows_the_newest_and_the_oldest_and_how_many_between(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    store = HistoryStore(db)
    doomed = _record(store, 25, days_ago=3)
    store.close()
    dry = cli("history", "prune", "--keep-days", "0", "-C", "--history", db)
    assert dry.rc == 0, dry.err
    lines = dry.out.splitlines()
    assert lines[0] == f"would remove 25 run(s) older than 0 days from {db} (dry run: nothing deleted)"
    assert lines[12] == "... 5 more ..." and len(lines) == 23
    assert _listed(dry.out) == doomed[::-1][:10] + doomed[::-1][-10:]
    assert cli("history", "prune", "--keep-days", "0", "--history", db).out.startswith("removed 25 run(s) ")


def test_a_dry_run_with_nothing_to_delete_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    store = HistoryStore(db)
    _record(store, 2, days_ago=1)
    store.close()
    dry = cli("history", "prune", "--keep-days", "7", "--dry-run", "--history", db)
    assert (dry.rc, dry.out) == (0, f"would remove 0 run(s) older than 7 days from {db} (dry run: nothing deleted)\n")
