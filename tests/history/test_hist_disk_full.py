"""A disk that fills during a run never leaves a run that exited normally recorded as
`aborted (controller gone)`: its end is recorded after all, marked incomplete (what was not
recorded, and why), or kept in the room it reserved beside the database and recorded once
the history can be written; readers show it meanwhile. A small tmpfs is the full disk."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from opsrunner.history.liveness import GONE
from tests.conftest import write_yaml
from tests.helpers import CliResult, cli_subprocess

TASKS = [{"name": f"step {i}", "command": "true"} for i in range(4)]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """Mounts a tmpfs of N KiB of this test's own; unmounted at its end."""
    mounted: list[Path] = []

    def mount(kib: int) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmpfs: Callable[[int], Path]) -> Path:
    return tmpfs(512)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "all", "gather_facts": False, "tasks": TASKS}])
    return proj


def run(project: Path, db: Path, *args: str) -> CliResult:
    return cli_subprocess(*args, cwd=project, env={"OPSRUNNER_HISTORY": str(db)})


def fill(mount: Path, leave_kib: int) -> Path:
    """Fill the disk but `leave_kib` KiB."""
    free = int(subprocess.run(["df", "-k", "--output=avail", str(mount)], capture_output=True, text=True,
                              check=True).stdout.split()[-1])
    filler = mount / "filler"
    with filler.open("ab") as fh:
        fh.write(b"\0" * max(0, free - leave_kib) * 1024)
    return filler


SHOWN = ("id", "started", "ended", "exit_code", "result", "label", "recap", "reason", "record_gap", "playbook",
         "command", "extra_vars")


def newest(project: Path, db: Path) -> dict[str, Any]:
    """The newest run as `history --json` shows it: what a reader sees of its record."""
    res = run(project, db, "history", "--json")
    assert res.rc == 0, res.err
    return {k: v for k, v in json.loads(res.out)[0].items() if k in SHOWN}


def dashboard_label(db: Path) -> str:
    """The newest run's label as the dashboard's reader (read-only: it records nothing) shows it."""
    from opsrunner.history.store import HistoryStore
    from opsrunner.web.data import run_summary

    store = HistoryStore(db, read_only=True)
    try:
        return str(run_summary(store.runs(limit=1)[0])["label"])
    finally:
        store.close()


def raw_end(db: Path, run_id: str) -> tuple[Any, ...] | None:
    """What the database itself holds of a run's end (None: no row)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT exit_code, record_gap FROM runs WHERE id = ?", (run_id,)).fetchone()


def test_a_run_the_disk_filled_under_is_recorded_ok_and_incomplete(project: Path,
                                                                   tmpfs: Callable[[int], Path]) -> None:
    """The trial user's case: a 300 KiB tmpfs, ~64 KiB left (room for the run's row, not for
    its later writes); the run exits 0 with a warning. Once there is room again, every reader
    shows it ok and its record incomplete (it was `aborted (controller gone)` with 0 hosts)."""
    small_disk = tmpfs(300)
    db = small_disk / "h.db"
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    filler = fill(small_disk, 64)
    res = run(project, db, "play", "ok.yml", "-i", "inv.yml")
    assert res.rc == 0, res.err
    assert f"WARNING: run history not recorded in {db}: OperationalError: " in res.err
    filler.unlink()
    assert dashboard_label(db) == "ok, record incomplete"
    row = newest(project, db)
    assert row["exit_code"] == 0 and row["label"] == "ok, record incomplete" and row["result"] == "ok", row
    assert list(row["recap"]) == ["h1"] and "the history could not be written from " in row["record_gap"]
    assert raw_end(db, row["id"]) == (0, row["record_gap"])  # in the database itself by now
    listing = run(project, db, "history").out.splitlines()[1]
    assert "ok (0), record incomplete" in listing and GONE not in listing and listing.split()[-5] == "1"
    shown = run(project, db, "show", row["id"]).out
    assert shown.splitlines()[0] == f"run {row['id']}: ok (exit code 0)"
    assert f"  record    incomplete: {row['record_gap']}" in shown
    assert list((small_disk / ".h.db.outcomes").iterdir()) == []


def test_an_end_that_cannot_be_written_is_kept_and_recorded_later(project: Path, small_disk: Path) -> None:
    """The disk fills in the middle of the run and is full still at its end (what the
    controller's closed connection freed is taken again): its end is kept aside."""
    db = small_disk / "h.db"
    fillers = [small_disk / "filler", small_disk / "filler2"]
    write_yaml(project / "fills.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        TASKS[0], {"name": "fill the disk", "shell": f"cat /dev/zero > {fillers[0]} || true"},
        {"name": "wait", "command": "sleep 1"},
        {"name": "fill what was freed", "shell": f"cat /dev/zero > {fillers[1]} || true"}, *TASKS[1:]]}])
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    res = run(project, db, "play", "fills.yml", "-i", "inv.yml")
    assert res.rc == 0, res.err
    kept = sorted((small_disk / ".h.db.outcomes").glob("*.json"))
    assert len(kept) == 1 and f"is kept in {kept[0]} and recorded once the history can be written" in res.err
    run_id = kept[0].stem
    for filler in fillers:
        filler.unlink()
    assert raw_end(db, run_id) == (None, None)  # the database: open still...
    assert dashboard_label(db) == "ok, record incomplete"  # ...its reader shows the end kept
    assert kept[0].exists()  # (it records nothing)
    row = newest(project, db)  # a writer records it...
    assert (row["id"], row["exit_code"], row["label"], list(row["recap"])) == \
        (run_id, 0, "ok, record incomplete", ["h1"]), row
    assert re.fullmatch(r"[01] of 7 task results recorded; the history could not be written from \d\d:\d\d:\d\d on: "
                        r"OperationalError: database or disk is full", row["record_gap"]), row["record_gap"]
    assert len(json.loads(run(project, db, "show", run_id, "--json").out)["tasks"]) == int(row["record_gap"][0])
    assert raw_end(db, run_id) == (0, row["record_gap"])
    assert not kept[0].exists()  # ...and forgets the file
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    assert newest(project, db)["label"] == "ok" and list((small_disk / ".h.db.outcomes").iterdir()) == []


def test_a_run_whose_start_could_not_be_written_is_recorded_from_what_it_kept(project: Path,
                                                                              small_disk: Path) -> None:
    """The disk is all but full at the start: the room reserved first, the row never written."""
    from opsrunner.history import outcomes

    db = small_disk / "h.db"
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    filler = fill(small_disk, outcomes.RESERVED_BYTES // 1024)
    res = run(project, db, "play", "ok.yml", "-i", "inv.yml", "-e", "api_token=not-to-be-seen-123")
    assert res.rc == 0, res.err
    assert "is kept in" in res.err, res.err
    [kept] = (small_disk / ".h.db.outcomes").glob("*.json")
    filler.unlink()
    assert raw_end(db, kept.stem) is None and dashboard_label(db) == "ok, record incomplete"
    rows = json.loads(run(project, db, "history", "--json").out)
    assert [r["label"] for r in rows] == ["ok, record incomplete", "ok"] and rows[0]["id"] == kept.stem
    assert rows[0]["record_gap"].startswith("0 of 4 task results recorded") and list(rows[0]["recap"]) == ["h1"]
    assert rows[0]["extra_vars"] == {"api_token": "********"} and raw_end(db, kept.stem) is not None
    assert all(b"not-to-be-seen-123" not in p.read_bytes() for p in small_disk.rglob("*") if p.is_file())


def test_a_controller_killed_leaves_no_reservation_behind(project: Path, tmp_path: Path) -> None:
    """The room a run reserved goes with its row's end; that of a controller killed, once a
    writer sees it gone."""
    import os
    import signal
    import sys

    from tests.conftest import ROOT, kill_marked, sleep_marker, wait_for

    db = tmp_path / "h.db"
    token = sleep_marker()
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0
    folder = tmp_path / ".h.db.outcomes"
    assert list(folder.iterdir()) == []
    write_yaml(project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        TASKS[0], {"name": "long", "command": f"sleep {token}"}]}])
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml"],
                                  cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: len(list(folder.iterdir())) == 1, 30)
        assert wait_for(lambda: json.loads(run(project, db, "history", "--json").out)[0]["tasks"], 30)
        assert len(list(folder.iterdir())) == 1  # running: its room kept
        controller.send_signal(signal.SIGKILL)
        controller.wait(30)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_marked(token)
    assert newest(project, db)["result"] == GONE
    assert list(folder.iterdir()) == []
