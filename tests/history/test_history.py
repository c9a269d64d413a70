"""Run history end to end: what `play` records, `history`/`show` output, masking, git state,
parallel writers, an unwritable database, pruning, and the run lock of `play --lock`."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, write_yaml
from tests.helpers import CliResult, cli_subprocess

PLAYBOOK = [{
    "name": "History demo", "hosts": "all", "tasks": [
        {"name": "Say hello", "shell": "echo hello"},
        {"name": "Quiet", "debug": {"msg": "nothing changes"}},
        {"name": "Fail with the token", "fail": {"msg": "bad token {{ api_token | default('none') }}"},
         "when": "should_fail | default(false) | bool"},
    ]}]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository holding a playbook and a local inventory of two hosts."""
    proj = tmp_path / "proj"
    write_yaml(proj / "site.yml", PLAYBOOK)
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"web1": {"connection": "local"},
                                                    "web2": {"connection": "local"}}}})
    git = ["git", "-C", str(proj), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "procedure"], check=True)
    return proj


def run(project: Path, db: Path, *args: str) -> CliResult:
    return cli_subprocess(*args, cwd=project, env={"OPSRUNNER_HISTORY": str(db)})


def head(project: Path) -> str:
    return subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_play_is_recorded_with_git_commit_and_masked_secrets(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    res = run(project, db, "play", "site.yml", "-i", "inv.yml", "-e", "api_token=s3cr3t-value should_fail=yes")
    assert res.rc == 2
    listing = run(project, db, "history")
    assert listing.rc == 0, listing.err
    header, row = listing.out.splitlines()
    assert header.split() == ["RUN", "ID", "STARTED", "DURATION", "RESULT", "HOSTS", "PLAYBOOK", "SCHEDULE", "GROUP",
                                   "COMMIT"]
    run_id = row.split()[0]
    assert "failed (2)" in row and " 2 " in row and "site.yml" in row and head(project)[:10] in row
    shown = run(project, db, "show", run_id[:17])
    assert shown.rc == 0, shown.err
    assert f"run {run_id}: failed (exit code 2)" in shown.out
    assert f"commit    {head(project)}\n" in shown.out  # a clean tree: no "(uncommitted changes)"
    assert "failed: [web1] Fail with the token" in shown.out and "bad token ********" in shown.out
    assert "changed: [web2] Say hello" in shown.out
    assert "web1 : ok=2 changed=1 unreachable=0 failed=1" in shown.out
    assert '"api_token": "********"' in shown.out and '"should_fail": "yes"' in shown.out
    for f in tmp_path.glob("h.db*"):  # the database, its WAL and shared memory
        assert b"s3cr3t-value" not in f.read_bytes()
    assert db.stat().st_mode & 0o777 == 0o600  # command lines and messages: for its owner only
    data = json.loads(run(project, db, "show", run_id, "--json").out)
    assert data["git_commit"] == head(project) and data["git_dirty"] is False
    assert data["exit_code"] == 2 and data["recap"]["web2"]["failed"] == 1
    assert [t["task"] for t in data["tasks"] if t["host"] == "web1"] == ["Say hello", "Quiet", "Fail with the token"]
    assert data["inventory"] == ["inv.yml"] and data["command"].startswith("opsrunner play site.yml")


def test_a_run_stopped_by_preflight_is_recorded_as_ended(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    write_yaml(project / "bad.yml", [{"hosts": "all", "tasks": [{"kill_old": {"pattern": "x", "grace": "{{ g }}"}}]}])
    res = run(project, db, "play", "bad.yml", "-i", "inv.yml", "-e", "g=soon")
    assert res.rc == 4, res.err
    (row,) = run(project, db, "history").out.splitlines()[1:]
    assert "bad input (4)" in row and "running" not in row


def test_dirty_tree_is_recorded(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    (project / "site.yml").write_text((project / "site.yml").read_text() + "\n# edited\n")
    assert run(project, db, "play", "site.yml", "-i", "inv.yml").rc == 0
    out = run(project, db, "history").out
    assert f"{head(project)[:10]}+dirty" in out
    data = json.loads(run(project, db, "history", "--json").out)
    assert data[0]["git_dirty"] is True and data[0]["result"] == "ok"


def test_parallel_runs_write_one_database(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "site.yml", "-i", "inv.yml", "-e",
                               f"n={i}"], cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(6)]
    errs = [p.communicate(timeout=180)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errs
    assert all(b"WARNING" not in e for e in errs), errs
    data = json.loads(run(project, db, "history", "--json", "-n", "50").out)
    assert sorted(r["extra_vars"]["n"] for r in data) == [str(i) for i in range(6)]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        counts = [c for (c,) in conn.execute("SELECT count(*) FROM results GROUP BY run_id")]
    assert counts == [6] * 6  # 3 tasks x 2 hosts, every run complete


def test_a_running_play_has_its_finished_tasks_in_the_history(tmp_path: Path) -> None:
    """Results reach the database while the run goes on (within the writer's interval), not
    only at its end: `opsrunner show` in another terminal sees how far a long run got."""
    from opsrunner.history.recorder import WRITE_INTERVAL_S

    db, release = tmp_path / "h.db", tmp_path / "release"
    write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        {"name": "quick", "shell": "true"},
        {"name": "held", "shell": f"while [ ! -e {release} ]; do sleep 0.02; done", "timeout": 60}]}])
    write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "pb.yml", "-i", "inv.yml"], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def rows() -> list[tuple[str, object]]:
        if not db.exists():
            return []
        with sqlite3.connect(db) as conn:
            try:
                return list(conn.execute("SELECT r.task, runs.ended FROM results r JOIN runs ON runs.id = r.run_id"))
            except sqlite3.OperationalError:  # the schema is being created
                return []

    try:
        deadline = time.monotonic() + 30
        while not rows() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(WRITE_INTERVAL_S / 4)
        assert rows() == [("quick", None)]  # the run has not ended: the held task is still running
    finally:
        release.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert sorted(task for task, _ in rows()) == ["held", "quick"]


def test_unwritable_history_warns_once_and_never_fails_the_run(project: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = run(project, blocker / "history.db", "play", "site.yml", "-i", "inv.yml")
    assert res.rc == 0, res.err
    assert res.err.count("WARNING: run history not recorded in ") == 1, res.err
    assert "PLAY RECAP" in res.out


def test_no_history_and_history_flag(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    assert run(project, db, "play", "site.yml", "-i", "inv.yml", "--no-history").rc == 0
    assert not db.exists()
    other = tmp_path / "other.db"
    assert run(project, db, "play", "site.yml", "-i", "inv.yml", "--history", str(other)).rc == 0
    assert not db.exists()
    assert len(json.loads(run(project, db, "history", "--json", "--history", str(other)).out)) == 1


def test_history_filters_and_prune(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    write_yaml(project / "other.yml", [{"hosts": "web1", "tasks": [{"debug": {"msg": "x"}}]}])
    assert run(project, db, "play", "site.yml", "-i", "inv.yml").rc == 0
    assert run(project, db, "play", "site.yml", "-i", "inv.yml", "-e", "should_fail=yes").rc == 2
    assert run(project, db, "play", "other.yml", "-i", "inv.yml", "-l", "web1").rc == 0

    def ids(*args: str) -> list[str]:
        return [r["playbook"].rsplit("/", 1)[1] + ":" + r["result"]
                for r in json.loads(run(project, db, "history", "--json", *args).out)]

    assert ids() == ["other.yml:ok", "site.yml:failed", "site.yml:ok"]  # newest first
    assert ids("--failed") == ["site.yml:failed"]
    assert ids("--playbook", "site.yml") == ["site.yml:failed", "site.yml:ok"]
    assert ids("--host", "web2") == ["site.yml:failed", "site.yml:ok"]
    assert ids("-n", "1") == ["other.yml:ok"]
    kept = run(project, db, "history", "prune", "--keep-days", "1")
    assert kept.out.startswith("removed 0 run(s) older than 1 days")
    time.sleep(0.1)
    gone = run(project, db, "history", "prune", "--keep-days", "0")
    assert gone.rc == 0 and gone.out.startswith("removed 3 run(s)")
    assert ids() == []
    missing = run(project, db, "show", "nope")
    assert missing.rc == 5 and "no single run matches 'nope'" in missing.err


def test_run_lock_refuses_a_second_run(project: Path, tmp_path: Path) -> None:
    pause = {"pause": {"seconds": "{{ wait | default(8) | int }}"}}
    write_yaml(project / "slow.yml", [{"hosts": "web1", "tasks": [pause]}])
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"),
               OPSRUNNER_HISTORY=str(tmp_path / "h.db"))
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                             cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        locks = tmp_path / "state" / "opsrunner" / "locks"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(f.read_text() for f in locks.glob("*.lock")):
            time.sleep(0.1)
        second = subprocess.run([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                                cwd=project, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stderr
        assert re.search(rf"locked by \S+@\S+ \(opsrunner pid {first.pid}, playbook slow.yml, started "
                         r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", second.stderr), second.stderr
        assert "another run of this playbook and inventory is in progress" in second.stderr
        assert "PLAY" not in second.stdout  # refused before anything ran
        unlocked = subprocess.run([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml",
                                   "-e", '{"wait": 0}'], cwd=project, env=env, capture_output=True, text=True,
                                  timeout=60)
        assert unlocked.returncode == 0, unlocked.stderr  # without --lock nothing is refused
    finally:
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    third = subprocess.run([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock",
                            "-e", '{"wait": 0}'], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr  # the lock ended with the first run
