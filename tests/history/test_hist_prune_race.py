"""`history prune` deletes exactly the runs it read as prunable (and a dry run lists): a run
read as going on under a live controller and closed by that controller before the DELETE
(PostgreSQL's READ COMMITTED lets another connection close it meanwhile) is kept, as prune
reports, not deleted by a condition judged again at DELETE time. The controller's close is
placed between the read and the DELETE by a store whose read closes it right after; on
PostgreSQL it is written by a connection of its own, as a controller's is."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from opsrunner.history.liveness import ControllerStamp
from opsrunner.history.store import HistoryStore, RunRow, TaskRow
from tests.history.test_hist_prune_dry_run import _dead_stamp


class _ClosedWhileRead(HistoryStore):
    """A store whose prune reads its runs, then `meanwhile` runs (a controller closing its row)."""

    meanwhile: Callable[[], None] = staticmethod(lambda: None)

    def _prunable(self, cutoff: float) -> tuple[list[str], int]:
        found = super()._prunable(cutoff)
        self.meanwhile()
        return found


def _record(store: HistoryStore) -> None:
    """Three runs of 20 days ago, each with a task on h1: finished, open under this (live)
    process, open under a controller that is gone."""
    old = time.time() - 20 * 86400
    for run_id, stamp in (("done", ControllerStamp.of_this_process()), ("live", ControllerStamp.of_this_process()),
                          ("dead", _dead_stamp())):
        store.start_run(RunRow(id=run_id, started=old, playbook="/p/site.yml"), stamp)
        store.add_tasks(run_id, [(1, TaskRow("p", "t", "command", "h1", "ok", False, False, "", "", 0.1))])
    store.finish_run("done", 0, {"h1": {"ok": 1}})


def _left(store: HistoryStore) -> tuple[list[str], list[str], list[str]]:
    """The ids of the runs, of the runs with task rows, of the runs with host rows, left."""
    return ([r[0] for r in store._q("SELECT id FROM runs ORDER BY id")],
            [r[0] for r in store._q("SELECT DISTINCT run_id FROM results ORDER BY run_id")],
            [r[0] for r in store._q("SELECT DISTINCT run_id FROM run_hosts ORDER BY run_id")])


def _kept_as_reported(location: str, controller: HistoryStore | None = None) -> None:
    """`controller`: a connection of its own that closes the run; without one (SQLite, whose
    prune transaction holds the only write lock), prune's own connection closes it."""
    writer = HistoryStore(location)
    pruner = _ClosedWhileRead(location)
    try:
        _record(writer)
        assert writer.prune_plan(7) == (["done", "dead"], 1)
        if controller is not None:
            pruner.meanwhile = lambda: controller.finish_run("live", 0, {"h1": {"ok": 1}})
        else:
            pruner.meanwhile = lambda: pruner._q("UPDATE runs SET ended = ?, exit_code = 0 WHERE id = 'live'",
                                                 (time.time(),))
        assert pruner.prune_runs(7) == (2, 1)  # removed 2, kept 1 still running
        assert _left(writer) == (["live"], ["live"], ["live"])
        assert writer.run("live").exit_code == 0  # type: ignore[union-attr]
    finally:
        pruner.close()
        writer.close()


def test_a_run_closed_during_prune_is_kept_as_reported_sqlite(tmp_path: Path) -> None:
    _kept_as_reported(str(tmp_path / "h.db"))


def test_a_run_closed_during_prune_is_kept_as_reported_postgres(pg_url: str) -> None:
    controller = HistoryStore(pg_url)
    try:
        _kept_as_reported(pg_url, controller)
    finally:
        controller.close()
