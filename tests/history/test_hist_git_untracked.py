"""The git state of a run tells when its commit does not hold what it ran: a playbook, a task
file or a role that git does not track (`??`) makes the run dirty, and a note names them.
Untracked files the run does not read, and ignored files, change nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_yaml
from tests.helpers import CliResult, cli_subprocess

TASKS = [{"name": "one", "command": "true"}]


def git(project: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(project), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A checkout with a committed playbook and inventory, and untracked files beside them."""
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "site.yml", [{"hosts": "all", "gather_facts": False, "tasks": TASKS}])
    write_yaml(proj / "with_tasks.yml", [{"hosts": "all", "gather_facts": False,
                                          "tasks": [{"import_tasks": "tasks/extra.yml"}]}])
    write_yaml(proj / "with_role.yml", [{"hosts": "all", "gather_facts": False, "roles": ["fresh"]}])
    (proj / ".gitignore").write_text("scratch/\n")
    git(proj, "init", "-q")
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "v1")
    write_yaml(proj / "new.yml", [{"hosts": "all", "gather_facts": False, "tasks": TASKS}])  # untracked
    write_yaml(proj / "tasks" / "extra.yml", TASKS)  # untracked
    write_yaml(proj / "roles" / "fresh" / "tasks" / "main.yml", TASKS)  # untracked
    (proj / "notes.txt").write_text("not read by any run\n")  # untracked, unread
    write_yaml(proj / "scratch" / "ignored.yml", TASKS)  # ignored
    return proj


def play(project: Path, db: Path, playbook: str) -> tuple[CliResult, dict[str, Any]]:
    res = cli_subprocess("play", playbook, "-i", "inv.yml", cwd=project, env={"OPSRUNNER_HISTORY": str(db)})
    shown = cli_subprocess("history", "--json", "-n", "1", cwd=project, env={"OPSRUNNER_HISTORY": str(db)})
    return res, json.loads(shown.out)[0]


@pytest.mark.parametrize(("playbook", "untracked"), [
    ("new.yml", "new.yml"),
    ("with_tasks.yml", "tasks/extra.yml"),
    ("with_role.yml", "roles/fresh/tasks/main.yml"),
])
def test_a_run_of_what_git_does_not_track_is_dirty_and_says_which(project: Path, tmp_path: Path, playbook: str,
                                                                   untracked: str) -> None:
    db = tmp_path / "h.db"
    assert "?? " + untracked.split("/")[0] in git(project, "status", "--porcelain")
    res, row = play(project, db, playbook)
    assert res.rc == 0, res.err
    commit = git(project, "rev-parse", "HEAD")
    assert row["git_commit"] == commit and row["git_dirty"] is True
    assert row["notes"] == [f"untracked in git, not in commit {commit[:10]}: {untracked}"]
    env = {"OPSRUNNER_HISTORY": str(db)}
    assert f"{commit[:10]}+dirty" in cli_subprocess("history", cwd=project, env=env).out
    shown = cli_subprocess("show", row["id"], cwd=project, env=env).out
    assert f"  commit    {commit} (uncommitted changes)\n" in shown
    assert f"  note      untracked in git, not in commit {commit[:10]}: {untracked}\n" in shown


def test_untracked_files_the_run_does_not_read_and_ignored_ones_leave_it_clean(project: Path,
                                                                                 tmp_path: Path) -> None:
    res, row = play(project, tmp_path / "h.db", "site.yml")
    assert res.rc == 0, res.err
    assert row["git_commit"] == git(project, "rev-parse", "HEAD") and row["git_dirty"] is False
    assert row["notes"] == []


def test_a_run_of_an_untracked_playbook_that_fails_to_load_is_dirty_too(project: Path, tmp_path: Path) -> None:
    (project / "new.yml").write_text("- hosts: all\n  tasks: [\n")
    res, row = play(project, tmp_path / "h.db", "new.yml")
    assert res.rc == 4 and row["label"] == "bad input (exit 4)", res.err
    assert row["git_dirty"] is True and row["notes"][0].endswith(": new.yml")


def test_a_playbook_outside_any_checkout_has_no_git_state(tmp_path: Path) -> None:
    proj = tmp_path / "plain"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "site.yml", [{"hosts": "all", "gather_facts": False, "tasks": TASKS}])
    res, row = play(proj, tmp_path / "h.db", "site.yml")
    assert res.rc == 0 and (row["git_commit"], row["git_dirty"], row["notes"]) == (None, None, [])
