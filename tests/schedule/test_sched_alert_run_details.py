"""A scheduled run's alert says what went wrong from what the run itself saw, not from its
history: with a history that cannot record the run (a corrupt file), the alert still names
the host, the task and its message, quotes the last lines of the failed command's stderr
(its stdout where stderr is empty), and says the run was not recorded and why. `schedule
add` refuses a --history that exists but is no opsrunner history, touching nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from opsrunner.history.store import open_history
from tests.alerts import Alerts
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv


def _failing(env: ProjectEnv, command: str) -> None:
    write_yaml(env.project / "playbooks" / "quick_t2.yml", [{"name": "Quick", "hosts": "trainers", "tasks": [
        {"name": "fail T2X", "command": f"sh -c {command!r}"}]}])
    write_yaml(env.project / "inv_quick.yml",
               {"all": {"children": {"trainers": {"hosts": {"quick": {"connection": "local"}}}}}})


def _add(env: ProjectEnv, alerts: Alerts, *args: str) -> None:
    added = env.run("schedule", "add", "qc", "playbooks/quick_t2.yml", "-i", "inv_quick.yml", "--every", "1d",
                    "--notify", alerts.url, *args)
    assert added.rc == 0, added.err


def test_an_unrecordable_runs_alert_says_what_failed_and_that_it_went_unrecorded(env: ProjectEnv,
                                                                                  alerts: Alerts) -> None:
    _failing(env, "echo out-line-T2X; echo err-line-T2X >&2; exit 1")
    _add(env, alerts)
    env.history_db.write_bytes(b"\x00\x17 not a database at all " * 800)  # corrupted after the add
    res = env.run("schedule", "run", "qc")
    assert res.rc == 2, res.out + res.err
    [alert] = alerts.received
    lines = alert["message"].splitlines()
    assert lines[0].startswith("opsrunner: schedule qc FAILED (exit 2): playbooks/quick_t2.yml on ")
    assert lines[1:4] == ["- [quick] fail T2X: non-zero return code 1", "  stderr:", "    err-line-T2X"], lines
    [unrecorded] = [ln for ln in lines if "NOT RECORDED" in ln]
    assert unrecorded.startswith("run 20") and unrecorded.endswith(
        f" NOT RECORDED: the run history {env.history_db} cannot be opened: DatabaseError: file is not a database")
    assert not any(ln.startswith("run ") and "opsrunner show" in ln for ln in lines)


def test_an_alert_quotes_stdout_where_stderr_is_empty_and_the_run_is_recorded(env: ProjectEnv,
                                                                              alerts: Alerts) -> None:
    _failing(env, "for i in 1 2 3 4 5 6 7; do echo out-$i; done; exit 1")
    _add(env, alerts)
    assert env.run("schedule", "run", "qc").rc == 2
    [run] = env.history()
    [alert] = alerts.received
    lines = alert["message"].splitlines()
    assert lines[1:8] == ["- [quick] fail T2X: non-zero return code 1", "  stdout:",
                          *(f"    out-{i}" for i in range(3, 8))], lines  # its last 5 lines
    assert lines[-1] == f"run {run['id']}: opsrunner show {run['id']}"
    assert run["tasks"][0]["stdout_tail"] == "\n".join(f"out-{i}" for i in range(1, 8))


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    db.close()


@pytest.mark.parametrize(("make", "why"), [
    (lambda p: p.write_bytes(b"\x00\x17 not a database at all " * 800),
     "not a SQLite database opsrunner can read (DatabaseError: file is not a database)"),
    (_foreign, "a SQLite database, but not an opsrunner run history (its tables: notes)"),
    (lambda p: p.mkdir(), "a directory, not a SQLite file"),
])
def test_schedule_add_refuses_a_history_that_is_no_opsrunner_history(env: ProjectEnv, alerts: Alerts,
                                                                     make: object, why: str) -> None:
    _failing(env, "exit 1")
    target = env.root / "other.db"
    make(target)  # type: ignore[operator]
    before = sorted(p.name for p in env.root.iterdir())
    content = target.read_bytes() if target.is_file() else None
    res = env.run("schedule", "add", "qc", "playbooks/quick_t2.yml", "-i", "inv_quick.yml", "--every", "1d",
                  "--notify", alerts.url, "--history", str(target))
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: <--history>: {target} is no opsrunner run history: {why} (at --history)" in res.err, res.err
    assert sorted(p.name for p in env.root.iterdir()) == before  # nothing created: no -wal, no schedule
    assert (target.read_bytes() if target.is_file() else None) == content


def test_schedule_add_takes_a_history_or_a_file_yet_to_be_made_and_changes_neither(env: ProjectEnv,
                                                                                    alerts: Alerts) -> None:
    _failing(env, "exit 1")
    store = open_history(env.root / "older.db")  # a real history, then set back to schema 6: not migrated by add
    assert store.db is not None
    store.db.execute("PRAGMA user_version = 6")
    store.close()
    content = (env.root / "older.db").read_bytes()
    for n, history in enumerate(("older.db", "missing.db")):
        before = sorted(p.name for p in env.root.iterdir())
        res = env.run("schedule", "add", f"q{n}", "playbooks/quick_t2.yml", "-i", "inv_quick.yml", "--every", "1d",
                      "--history", str(env.root / history), "--dry-run")
        assert res.rc == 0, res.err
        assert sorted(p.name for p in env.root.iterdir()) == before
    assert (env.root / "older.db").read_bytes() == content


def test_schedule_add_leaves_a_history_with_a_wal_and_no_shm_alone(env: ProjectEnv, alerts: Alerts) -> None:
    """A history copied (or left by a crash) with its -wal but not its -shm: SQLite cannot read it
    read-only without creating the -shm, owned by whoever reads (root's, under another user's
    controller). `schedule add` makes no file there, and takes it (the run warns if it cannot
    record)."""
    _failing(env, "exit 1")
    live = env.root / "live"
    live.mkdir()
    writer = sqlite3.connect(live / "h.db")
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.execute("INSERT INTO t VALUES (1)")
    writer.commit()
    copied = env.root / "copied"
    copied.mkdir()
    for name in ("h.db", "h.db-wal"):  # the -shm left behind, as a copy of the files would
        (copied / name).write_bytes((live / name).read_bytes())
    writer.close()
    res = env.run("schedule", "add", "qw", "playbooks/quick_t2.yml", "-i", "inv_quick.yml", "--every", "1d",
                  "--history", str(copied / "h.db"), "--dry-run")
    assert res.rc == 0, res.err
    assert sorted(p.name for p in copied.iterdir()) == ["h.db", "h.db-wal"]
