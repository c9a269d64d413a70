"""A run that ends before its play begins is recorded too: bad input (exit 4), no host to
target (exit 1), a refusal (a held run lock, a scheduled run's `--git-pull` refusing a
dirty checkout: exit 2), with its exit code and why, masked. `history`, `show`, `schedule
list`, the dashboard's data and the alerts see it, never the previous run's `ok`."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.alerts import Alerts
from tests.conftest import ROOT, wait_for, write_yaml
from tests.helpers import CliResult, ProjectEnv

SECRET = "hunter2-very-secret"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"command": "true"}]}])
    (proj / "broken.yml").write_text("- hosts: all\n  tasks: [\n")
    return proj


def run(project: Path, db: Path, *args: str) -> CliResult:
    """`opsrunner ARGS` without a controlling terminal (as a timer runs it: -K has none to ask at)."""
    env = dict(os.environ, OPSRUNNER_HISTORY=str(db), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "opsrunner", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120, start_new_session=True, stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def rows(project: Path, db: Path) -> list[dict[str, Any]]:
    res = run(project, db, "history", "--json")
    assert res.rc == 0, res.err
    return list(json.loads(res.out))


CASES = [  # args, exit code, label, what the reason says
    (["broken.yml"], 4, "bad input (exit 4)", "YAML syntax error"),
    (["missing.yml"], 4, "bad input (exit 4)", "missing.yml: playbook not found"),
    (["ok.yml", "-l", "typo"], 1, "no hosts (exit 1)", "leave no hosts to target"),
    (["ok.yml", "-l", SECRET], 1, "no hosts (exit 1)", "--limit '********' leave no hosts"),
    (["ok.yml", "-K"], 4, "bad input (exit 4)", "no terminal to read the become password"),
    (["ok.yml", "--json-events", "/nonexistent/dir/events.jsonl"], 5, "bad options (exit 5)", "--json-events"),
]


@pytest.mark.parametrize(("args", "code", "label", "why"), CASES, ids=[c[2] + " " + c[0][-1] for c in CASES])
def test_a_play_stopped_before_it_began_is_recorded_with_its_code_and_why(
        project: Path, tmp_path: Path, args: list[str], code: int, label: str, why: str) -> None:
    db = tmp_path / "h.db"
    assert run(project, db, "play", "ok.yml", "-i", "inv.yml").rc == 0  # the previous run: ok
    res = run(project, db, "play", *args, "-i", "inv.yml", "-e", f"api_token={SECRET}")
    assert res.rc == code, res.out + res.err
    newest, previous = rows(project, db)
    assert previous["label"] == "ok"
    assert newest["exit_code"] == code and newest["ended"] is not None and newest["label"] == label, newest
    assert newest["playbook"] == str(project / args[0]) and newest["tasks"] == [] and newest["recap"] == {}
    assert why in newest["reason"], newest["reason"]
    assert newest["extra_vars"] == {"api_token": "********"}
    listing = run(project, db, "history").out.splitlines()
    assert listing[1].split()[0] == newest["id"] and f"{newest['result']} ({code})" in listing[1], listing
    shown = run(project, db, "show", newest["id"]).out
    assert f"run {newest['id']}: {newest['result']} (exit code {code})" in shown
    assert f"  reason    {newest['reason'].splitlines()[0]}" in shown
    failed = json.loads(run(project, db, "history", "--json", "--failed").out)
    assert [r["id"] for r in failed] == [newest["id"]]
    for part in db.parent.glob("h.db*"):
        assert SECRET.encode() not in part.read_bytes()  # masked as every message is


def test_the_dashboard_labels_and_tells_why(project: Path, tmp_path: Path) -> None:
    from opsrunner.history.store import HistoryStore, RunFilter
    from opsrunner.web.data import run_detail, runs_page

    db = tmp_path / "h.db"
    assert run(project, db, "play", "broken.yml", "-i", "inv.yml").rc == 4
    store = HistoryStore(db)
    [line] = runs_page(store, RunFilter(), 1)["runs"]
    assert line["label"] == "bad input (exit 4)" and line["result"] == "bad input"
    [failed] = runs_page(store, RunFilter(result="failed"), 1)["runs"]
    detail = run_detail(store.run(failed["id"]))  # type: ignore[arg-type]
    assert "YAML syntax error" in detail["reason"] and detail["finished"]
    assert detail["notes"][0].startswith("ended: ") and "YAML syntax error" in detail["notes"][0]
    store.close()


def test_a_run_refused_by_the_run_lock_is_recorded_as_refused(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    write_yaml(project / "slow.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"pause": {"seconds": 5}}]}])
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path / "state"), OPSRUNNER_HISTORY=str(db))
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                             cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        locks = tmp_path / "state" / "opsrunner" / "locks"
        assert wait_for(lambda: any(f.read_text() for f in locks.glob("*.lock")), 30)
        second = subprocess.run([sys.executable, "-m", "opsrunner", "play", "slow.yml", "-i", "inv.yml", "--lock"],
                                cwd=project, env=env, capture_output=True, text=True, timeout=60)
    finally:
        first.wait(60)
    assert second.returncode == 2 and first.returncode == 0, second.stderr
    ok, refused = sorted(rows(project, db), key=lambda r: r["exit_code"])
    assert ok["label"] == "ok" and ok["recap"]
    assert refused["label"] == "refused (exit 2)" and refused["outcome"] == "refused" and refused["tasks"] == []
    assert refused["reason"].startswith("locked by ") and f"opsrunner pid {first.pid}" in refused["reason"]


# -- scheduled runs ------------------------------------------------------------------------------

def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    write_yaml(e.project / "site.yml", [{"hosts": "all", "gather_facts": False, "tasks": [{"command": "true"}]}])
    return e


def _last_listed(env: ProjectEnv, name: str) -> str:
    res = env.run("schedule", "list")
    assert res.rc == 0, res.err
    [line] = [ln for ln in res.out.splitlines() if ln.startswith(name + " ")]
    return line


def test_a_scheduled_run_refused_by_git_pull_is_recorded_and_listed(env: ProjectEnv, tmp_path: Path) -> None:
    upstream = tmp_path / "upstream.git"
    _git(env.project, "init", "-q", "-b", "main")
    _git(env.project, "add", "-A")
    _git(env.project, "commit", "-qm", "v1")
    subprocess.run(["git", "clone", "-q", "--bare", str(env.project), str(upstream)], check=True)
    _git(env.project, "remote", "add", "origin", str(upstream))
    _git(env.project, "fetch", "-q", "origin")
    _git(env.project, "branch", "-q", "--set-upstream-to=origin/main")
    assert env.run("schedule", "add", "pull", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull").rc == 0
    assert env.run("schedule", "run", "pull").rc == 0
    assert "ok (" in _last_listed(env, "pull")
    (env.project / "site.yml").write_text((env.project / "site.yml").read_text() + "\n# local edit\n")
    res = env.run("schedule", "run", "pull")
    assert res.rc == 2 and "has uncommitted changes" in res.err, res.err
    refused, ok = env.history()
    assert ok["label"] == "ok" and refused["schedule"] == "pull"
    assert refused["label"] == "refused (exit 2)" and refused["exit_code"] == 2 and refused["tasks"] == []
    assert refused["reason"] == f"refusing to run: {env.project} has uncommitted changes (site.yml)"
    assert refused["playbook"] == str(env.project / "site.yml")
    assert f"refused ({refused['id']})" in _last_listed(env, "pull")


def test_two_scheduled_runs_at_once_the_refused_one_is_recorded(env: ProjectEnv) -> None:
    slow = [{"hosts": "all", "gather_facts": False, "tasks": [{"pause": {"seconds": 5}}]}]
    write_yaml(env.project / "slow.yml", slow)
    assert env.run("schedule", "add", "slow", "slow.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env.vars)
    first = subprocess.Popen([sys.executable, "-m", "opsrunner", "schedule", "run", "slow"], cwd=env.project,
                             env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        locks = env.root / "state" / "opsrunner" / "locks"
        assert wait_for(lambda: any(f.read_text() for f in locks.glob("*.lock")), 30)
        second = env.run("schedule", "run", "slow")
    finally:
        first.wait(60)
    assert second.rc == 2 and first.returncode == 0, second.err
    refused, ok = env.history()
    assert refused["label"] == "refused (exit 2)" and "locked by " in refused["reason"]
    assert ok["label"] == "ok" and ok["schedule"] == refused["schedule"] == "slow"


def test_recovery_alert_after_a_run_broken_before_its_play(env: ProjectEnv, alerts: Alerts) -> None:
    good = (env.project / "site.yml").read_text()
    assert env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily",
                   "--notify", alerts.url, "--notify-on", "recovery").rc == 0
    assert env.run("schedule", "run", "nightly").rc == 0
    (env.project / "site.yml").write_text("- hosts: all\n  tasks: [\n")
    broken = env.run("schedule", "run", "nightly")
    assert broken.rc == 4, broken.err
    (env.project / "site.yml").write_text(good)
    assert env.run("schedule", "run", "nightly").rc == 0
    assert [a["title"] for a in alerts.received] == [
        "opsrunner: schedule nightly BAD INPUT (exit 4): site.yml",
        "opsrunner: schedule nightly RECOVERED (exit 0): site.yml"]
    recovered, failed, first = env.history()
    assert failed["label"] == "bad input (exit 4)" and "YAML syntax error" in failed["reason"]
    assert f"run {failed['id']}: opsrunner show {failed['id']}" in alerts.received[0]["message"]
    assert "ok (" in _last_listed(env, "nightly") and recovered["label"] == first["label"] == "ok"


def test_a_history_older_than_the_reason_column_is_migrated(tmp_path: Path) -> None:
    """Version 4 files (no reason, no outcome) read on: their runs' results as their exit codes say."""
    from opsrunner.history import migrations
    from opsrunner.history.store import HistoryStore

    db = tmp_path / "h.db"
    with sqlite3.connect(db) as conn:
        for script in migrations.SQLITE[:4]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 4")
        conn.execute("INSERT INTO runs (id, started, ended, exit_code, recap) VALUES ('old', 1.0, 2.0, 4, '{}')")
    store = HistoryStore(db)
    [old] = store.runs()
    assert (old.label, old.reason, old.outcome) == ("bad input (exit 4)", None, None)
    store.close()
