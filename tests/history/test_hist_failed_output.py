"""A failed task's output is kept in its record: the last lines of its stdout and stderr,
bounded (20 lines, 4 KB each), masked as everything recorded, nothing of a `no_log` task's;
`show`, `history --json` and the dashboard's data give it, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from opsrunner.history.store import open_history
from opsrunner.web import data
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv

SECRET = "Hunter2-pw-T2X"
PLAYBOOK = [{"name": "Output", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "Fine", "shell": "echo fine-out-T2X", "ignore_errors": True},
    {"name": "Quiet secret", "shell": "echo nolog-out-T2X; echo nolog-err-T2X >&2; exit 3", "no_log": True,
     "ignore_errors": True},
    {"name": "Loud", "shell": "for i in $(seq 1 30); do echo out-$i; done; echo err-line-T2X {{ db_password }} >&2; "
                             "head -c 9000 /dev/zero | tr '\\0' x >&2; echo >&2; echo err-last >&2; exit 1"},
]}]


def _project(tmp_path: Path, history: str) -> ProjectEnv:
    env = ProjectEnv(tmp_path)
    env.vars["OPSRUNNER_HISTORY"] = history
    write_yaml(env.project / "site.yml", PLAYBOOK)
    write_yaml(env.project / "inv.yml", {"all": {"hosts": {"quick": {"connection": "local"}}}})
    return env


def _check_recorded(env: ProjectEnv) -> None:
    res = env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_password={SECRET}")
    assert res.rc == 2, res.out + res.err
    [run] = env.history()
    tasks = {t["task"]: t for t in run["tasks"]}
    loud = tasks["Loud"]
    assert loud["msg"] == "non-zero return code 1"
    assert loud["stdout_tail"].splitlines() == [f"out-{i}" for i in range(11, 31)]  # the last 20 lines
    err = loud["stderr_tail"]
    assert err.endswith("\nerr-last") and len(err) <= 4096 and "err-line-T2X" not in err  # cut to its last 4 KB
    assert (tasks["Fine"]["stdout_tail"], tasks["Fine"]["stderr_tail"]) == ("", "")  # only a failure's output
    quiet = json.dumps(tasks["Quiet secret"])
    assert tasks["Quiet secret"]["status"] == "failed" and "nolog-" not in quiet
    assert (tasks["Quiet secret"]["stdout_tail"], tasks["Quiet secret"]["stderr_tail"]) == ("", "")
    shown = env.run("show", run["id"])
    assert shown.rc == 0, shown.err
    lines = shown.out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  failed: [quick] Loud ("))
    assert lines[at + 1:at + 4] == ["      non-zero return code 1", "      stdout:", "        out-11"]
    assert "        err-last" in lines and "nolog-" not in shown.out
    store = open_history(env.vars["OPSRUNNER_HISTORY"])
    found = store.run(run["id"])
    store.close()
    assert found is not None
    page = data.run_detail(found)  # the dashboard's data of the run
    [loud_page] = [t for t in page["tasks"]["quick"] if t["task"] == "Loud"]
    assert loud_page["stdout_tail"] == loud["stdout_tail"] and loud_page["stderr_tail"] == loud["stderr_tail"]


def test_a_failed_tasks_output_is_recorded_bounded_masked_and_shown(tmp_path: Path) -> None:
    env = _project(tmp_path, str(tmp_path / "history.db"))
    _check_recorded(env)
    raw = (tmp_path / "history.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("history.db-*"))
    assert b"nolog-" not in raw


def test_a_secret_in_a_failed_tasks_output_is_masked(tmp_path: Path) -> None:
    env = _project(tmp_path, str(tmp_path / "history.db"))
    write_yaml(env.project / "site.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Tell", "shell": "echo pw={{ db_password }}; echo also {{ db_password }} >&2; exit 1"}]}])
    assert env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_password={SECRET}").rc == 2
    [run] = env.history()
    [task] = run["tasks"]
    assert task["stdout_tail"] == "pw=********" and task["stderr_tail"] == "also ********", task
    shown = env.run("show", "last")
    assert SECRET not in shown.out and "also ********" in shown.out


def test_postgres_records_a_failed_tasks_output(pg_url: str, tmp_path: Path) -> None:
    _check_recorded(_project(tmp_path, pg_url))
