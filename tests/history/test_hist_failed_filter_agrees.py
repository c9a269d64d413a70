"""`opsrunner history --failed` and the dashboard's `?result=failed` list the same runs: those
that did not succeed, an aborted run (its controller gone, no exit code) among them; a run
going on (its controller alive) is in neither, nor a run that exited 0."""

from __future__ import annotations

import json
import time
from pathlib import Path

from opsrunner.history.liveness import ControllerStamp
from opsrunner.history.store import HistoryStore, RunRow
from tests.helpers import cli
from tests.history.test_hist_prune_dry_run import _dead_stamp
from tests.web.dashboard import Project, serving


def test_history_failed_and_the_dashboards_failed_filter_list_the_same_runs(tmp_path: Path) -> None:
    project = Project(tmp_path)
    store = HistoryStore(project.db)
    now = time.time()
    for n, (run_id, stamp) in enumerate([("ok-run", None), ("failed-run", None), ("aborted-run", _dead_stamp()),
                                         ("running-run", ControllerStamp.of_this_process())]):
        store.start_run(RunRow(id=run_id, started=now - 100 + n, playbook="/srv/ops/site.yml"), stamp)
    store.finish_run("ok-run", 0, {"web1": {"ok": 1}})
    store.finish_run("failed-run", 2, {"web1": {"failed": 1}})
    store.close()

    listed = cli("history", "--failed", "--json", "--history", str(project.db))
    assert listed.rc == 0, listed.err
    assert [r["id"] for r in json.loads(listed.out)] == ["aborted-run", "failed-run"]
    with serving(project) as server:
        shown = server.get("/api/runs?result=failed").json()["runs"]
        assert [r["id"] for r in shown] == ["aborted-run", "failed-run"]
        unfinished = server.get("/api/runs?result=unfinished").json()["runs"]
        assert [r["id"] for r in unfinished] == ["running-run", "aborted-run"]  # neither ended: as before
