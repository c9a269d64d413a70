"""History that answers questions: the run id printed at the start and carried by the JSON
events, the SCHEDULE column and --schedule, `show last`, ambiguous prefixes, dry runs; and
the schedules' side: NEXT RUN of an inactive timer, `schedule add --dry-run`, --git-pull
checked when the schedule is added."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from opsrunner.history.store import HistoryStore, RunRow
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv, read_events, user_crontab

PLAYBOOK = [{"name": "Questions", "hosts": "all", "vars": {"greeting": "hello"}, "tasks": [
    {"name": "Say {{ greeting }}", "shell": "echo hi"},
    {"name": "Fail on request", "fail": {"msg": "asked to fail"}, "when": "fail_it | default(false) | bool"},
]}]


class Env(ProjectEnv):
    """A project with PLAYBOOK and a local inventory."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        write_yaml(self.project / "site.yml", PLAYBOOK)
        write_yaml(self.project / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_play_prints_its_run_id_first_and_the_events_carry_it(env: Env, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    res = env.run("play", "site.yml", "-i", "inv.yml", "--json-events", str(events))
    assert res.rc == 0, res.err
    first = res.out.splitlines()[0]
    match = re.fullmatch(r"run (\S+) \(opsrunner show (\S+)\)", first)
    assert match and match.group(1) == match.group(2), first
    run_id = match.group(1)
    assert env.run("show", run_id).out.startswith(f"run {run_id}: ok")
    log = read_events(events)
    kinds = [e["event"] for e in log]
    assert kinds[0] == "play_start" and kinds[-2:] == ["play_end", "recap"]
    assert [e["run_id"] for e in log if e["event"] in ("play_start", "play_end")] == [run_id, run_id]
    starts = [e["task"] for e in log if e["event"] == "task_start"]
    ends = [e["task"] for e in log if e["event"] == "task_end"]
    assert starts[0] == "Say hello" and ends[0] == "Say hello"  # the templated name in both
    assert set(ends) <= set(starts)
    quiet = env.run("play", "site.yml", "-i", "inv.yml", "--no-history")
    assert not quiet.out.startswith("run ")  # nothing recorded, no id to give


def test_history_schedule_column_and_filter_show_last_and_dry_runs(env: Env) -> None:
    assert env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    assert env.run("schedule", "run", "nightly").rc == 0
    assert env.run("play", "site.yml", "-i", "inv.yml", "--check").rc == 0
    listing = env.run("history").out.splitlines()
    assert listing[0].split() == ["RUN", "ID", "STARTED", "DURATION", "RESULT", "HOSTS", "PLAYBOOK", "SCHEDULE",
                                  "GROUP", "COMMIT"]
    assert "ok (0), dry run" in listing[1] and re.search(r"site\.yml\s+-\s+-\s+-$", listing[1]), listing[1]
    assert re.search(r"ok \(0\)\s+1\s+site\.yml\s+nightly\s+-\s+-$", listing[2]), listing[2]
    only = env.run("history", "--schedule", "nightly").out.splitlines()
    assert len(only) == 2 and only[1].split()[0] == listing[2].split()[0]
    assert env.run("history", "--schedule", "weekly").out.splitlines()[1:] == []
    last = env.run("show", "last")
    assert last.rc == 0 and last.out.startswith(f"run {listing[1].split()[0]}: ok (exit code 0), dry run")


def test_an_ambiguous_prefix_lists_the_candidates(env: Env) -> None:
    store = HistoryStore(Path(env.vars["OPSRUNNER_HISTORY"]))
    for n, suffix in enumerate(("aaaa", "aaab", "bbbb")):
        store.start_run(RunRow(id=f"20261201-000000-{suffix}", started=1000.0 + n))
        store.finish_run(f"20261201-000000-{suffix}", 0, {})
    store.close()
    ambiguous = env.run("show", "20261201-000000-aa")
    assert ambiguous.rc == 5
    assert ambiguous.err == ("ERROR: run id prefix '20261201-000000-aa' is ambiguous; it matches:\n"
                             "  20261201-000000-aaab\n  20261201-000000-aaaa\n")
    assert env.run("show", "20261201-000000-b").out.startswith("run 20261201-000000-bbbb: ok")
    assert "no single run matches 'x'" in env.run("show", "x").err


def test_schedule_list_leaves_next_run_empty_for_an_inactive_timer(env: Env) -> None:
    user_crontab(env.root, env.vars)  # cron's line in a user's crontab: active
    assert env.run("schedule", "add", "review", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    assert env.run("schedule", "add", "live", "site.yml", "-i", "inv.yml", "--at", "hourly", "--cron").rc == 0
    rows = {line.split()[0]: line for line in env.run("schedule", "list").out.splitlines()[1:]}
    assert re.match(r"live\s+hourly\s+\d{4}-\d\d-\d\d \d\d:00:00\s+-\s+-\s+site\.yml$", rows["live"]), rows
    assert re.match(r"review\s+daily\s+-\s+-\s+site\.yml$", rows["review"]), rows  # units written, not active


def test_schedule_add_dry_run_prints_what_it_would_install_and_writes_nothing(env: Env) -> None:
    units = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "Sun 03:00", "--dry-run")
    assert units.rc == 0, units.err
    unit_dir = Path(env.vars["OPSRUNNER_UNIT_DIR"]).resolve()
    assert f"# {unit_dir}/opsrunner-nightly.timer:\n" in units.out and "OnCalendar=Sun 03:00\n" in units.out
    assert "ExecStart=" in units.out and "schedule run nightly" in units.out and "on_calendar: Sun 03:00" in units.out
    cron = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "Sun 03:00", "--cron",
                   "--dry-run")
    assert re.search(r"^0 3 \* \* 0 cd .* schedule run nightly .*# opsrunner-schedule:nightly$", cron.out, re.M)
    assert not (env.root / "schedules").exists() and not unit_dir.exists() and not (env.root / "crontab").exists()
    bad = env.run("schedule", "add", "nightly", "missing.yml", "--at", "daily", "--dry-run")
    assert bad.rc == 4  # checked as for real


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


def test_git_pull_is_checked_when_the_schedule_is_added(env: Env, tmp_path: Path) -> None:
    args = ("schedule", "add", "pulled", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull")
    not_git = env.run(*args)
    assert not_git.rc == 4 and "<--git-pull>: " in not_git.err and "not a git checkout with an upstream" in not_git.err
    _git(env.project, "init", "-q")
    _git(env.project, "add", "-A")
    _git(env.project, "commit", "-qm", "procedure")
    no_upstream = env.run(*args)
    assert no_upstream.rc == 4 and "(at --git-pull)" in no_upstream.err
    assert not (env.root / "schedules").exists()
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(env.project), str(origin)], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    added = env.run(*args, cwd=clone)
    assert added.rc == 0, added.err
