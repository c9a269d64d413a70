"""One holder record for both locks: a run holding its run lock (controller) and a job lock
(target) writes the same record into both files, naming the run's history row, and a run
that finds the run lock taken names that holder."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from opsrunner.history.store import HistoryStore
from opsrunner.locks.holder import NOT_WRITTEN_YET, LockHolder, describe_holder
from opsrunner.locks.run_lock import RunLock, RunLockedError
from tests.conftest import wait_for, write_inventory, write_yaml
from tests.helpers import opsrunner_process

HOLDER_KEYS = {"controller", "user", "pid", "playbook", "started", "run_id"}


def _record(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _history_ids(db: Path) -> list[str]:
    """The ids of the runs in a history database (none while it is not written yet)."""
    if not db.exists():
        return []
    store = HistoryStore(db)
    try:
        return [r.id for r in store.runs(limit=5)]
    finally:
        store.close()


def test_both_locks_hold_the_same_record_of_the_run(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tasks = [{"name": "lock", "job_lock": {"pidfile": str(work / "job.pid")}},
             {"name": "hold", "pause": {"seconds": 60}}]
    playbook = write_yaml(tmp_path / "hold.yml", [{"hosts": "all", "gather_facts": False, "tasks": tasks}])
    inventory = write_inventory(tmp_path / "inv.yml", {"box": {"connection": "local"}})
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "OPSRUNNER_HISTORY": str(tmp_path / "h.db")}
    job_lock = work / "job.lock"
    locks = tmp_path / "state" / "opsrunner" / "locks"
    before = time.time()
    with opsrunner_process("play", str(playbook), "-i", str(inventory), "--lock", cwd=tmp_path, env=env) as run:
        assert wait_for(lambda: "keeper_pid" in (_record(job_lock) or {}), 60), run.stdout
        run_locks = list(locks.glob("hold-*.lock"))
        assert len(run_locks) == 1
        run_record = _record(run_locks[0])
        job_record = _record(job_lock)
        assert run_record is not None and job_record is not None
        assert set(run_record) == HOLDER_KEYS
        assert {k: job_record[k] for k in HOLDER_KEYS} == run_record  # the keeper adds its own keys only
        assert wait_for(lambda: bool(_history_ids(tmp_path / "h.db")), 30)
        assert run_record["pid"] == run.pid and [run_record["run_id"]] == _history_ids(tmp_path / "h.db")
        assert run_record["controller"] == socket.gethostname() and run_record["playbook"] == str(playbook)
        assert before - 30 < run_record["started"] <= time.time()
        with pytest.raises(RunLockedError) as refused:
            RunLock.for_run(playbook, [inventory], locks).acquire(LockHolder.this_run(str(playbook)))
        assert refused.value.exit_code == 2
        assert refused.value.holder == LockHolder.from_record(run_record)
        assert str(refused.value).startswith(f"locked by {run_record['user']}@{socket.gethostname()} "
                                             f"(opsrunner pid {run.pid}, playbook {playbook}, started ")


@pytest.mark.parametrize("record", [None, {}, {"user": "bob"}, {"pid": "not a pid"}, ["a", "list"]])
def test_a_record_without_a_pid_reads_as_not_written_yet(record: object) -> None:
    assert LockHolder.from_record(record) is None
    assert describe_holder(LockHolder.from_record(record)) == NOT_WRITTEN_YET


def test_a_record_missing_keys_shows_question_marks() -> None:
    holder = LockHolder.from_record({"pid": 7, "keeper_pid": os.getpid()})
    assert describe_holder(holder) == "?@? (opsrunner pid 7, playbook ?, started ?)"
