"""The shared history on a real PostgreSQL (the suite's private cluster, tests/pg.py): many
controllers at once lose no row, slices run at once cover each host once, every reader
(history, show, schedule list, the dashboard's data) reads it, and a bad database or
password never loses a run silently nor shows the password."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opsrunner.history import migrations
from opsrunner.history.store import HistoryStore, open_history
from opsrunner.web import data
from tests import pg
from tests.conftest import write_yaml
from tests.helpers import ROOT, ProjectEnv, opsrunner_process

PLAYBOOK = [{"name": "Touch", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "Mark {{ inventory_hostname }}", "shell": "echo {{ inventory_hostname }} >> {{ marks }}"},
]}]


class Project(ProjectEnv):
    """A playbook that appends each host's name to a file: who ran where, once or twice."""

    def __init__(self, root: Path, history: str, hosts: int = 6) -> None:
        super().__init__(root)
        self.marks = root / "marks.txt"
        write_yaml(self.project / "site.yml", PLAYBOOK)
        write_yaml(self.project / "inv.yml", {"all": {"vars": {"marks": str(self.marks)}, "hosts": {
            f"node{i:02d}": {"connection": "local"} for i in range(hosts)}}})
        self.vars["OPSRUNNER_HISTORY"] = history

    def marked(self) -> list[str]:
        return sorted(self.marks.read_text().split()) if self.marks.exists() else []


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode()).fetchall()


CONTROLLER = textwrap.dedent("""
    import sys
    import opsrunner
    url, project, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for _ in range(count):
        result = opsrunner.run(opsrunner.PlayRequest(project + "/site.yml", inventory=[project + "/inv.yml"],
                                                     history_path=url))
        assert result.exit_code == 0, result.exit_code
""")


def test_postgres_four_controllers_25_runs_each_at_once_record_exactly_100_runs(pg_url: str, tmp_path: Path) -> None:
    """Four separate controller processes on a database none has used yet (they race for its
    migration too), 25 runs each at once: 100 runs, each with its task rows, no error."""
    env = Project(tmp_path, pg_url, hosts=2)
    procs = [subprocess.Popen([sys.executable, "-c", CONTROLLER, pg_url, str(env.project), "25"], cwd=env.project,
                              env={**env.vars, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    assert not any("WARNING" in o for o in outputs), outputs
    assert _rows(pg_url, "SELECT count(*), count(DISTINCT id), count(ended) FROM runs") == [(100, 100, 100)]
    assert _rows(pg_url, "SELECT count(*) FROM results") == [(200,)]
    assert _rows(pg_url, "SELECT version FROM opsrunner_schema") == [(migrations.VERSION,)]
    assert len(env.marked()) == 200
    listing = env.run("history", "-n", "500", "--json")
    assert listing.rc == 0, listing.err
    runs = json.loads(listing.out)
    assert len(runs) == 100 and {r["result"] for r in runs} == {"ok"}
    shown = env.run("show", runs[0]["id"])
    assert shown.rc == 0 and f"run {runs[0]['id']}: ok (exit code 0)" in shown.out, shown.err
    reader = HistoryStore(pg_url, read_only=True)  # the dashboard's reader
    try:
        page = data.runs_page(reader, data.RunFilter(), 1)
        assert len(page["runs"]) == data.PAGE_SIZE and page["has_older"]
        assert {h["host"] for h in data.hosts(reader)} == {"node00", "node01"}
    finally:
        reader.close()


def test_postgres_two_slices_run_at_once_cover_each_host_exactly_once_under_one_group(
        pg_url: str, tmp_path: Path) -> None:
    env = Project(tmp_path, pg_url, hosts=12)
    args = ["play", "site.yml", "-i", "inv.yml", "--run-group", "rollout-7"]
    with opsrunner_process(*args, "--slice", "1/2", cwd=env.project, env=env.vars) as one, \
            opsrunner_process(*args, "--slice", "2/2", cwd=env.project, env=env.vars) as two:
        outs = [one.communicate(timeout=120)[0], two.communicate(timeout=120)[0]]
        assert (one.returncode, two.returncode) == (0, 0), outs
    assert env.marked() == [f"node{i:02d}" for i in range(12)]  # every host, each once
    runs = json.loads(env.run("history", "--group", "rollout-7", "--json").out)
    assert sorted(r["slice"] for r in runs) == ["1/2", "2/2"] and {r["run_group"] for r in runs} == {"rollout-7"}
    first, second = (set(r["recap"]) for r in runs)
    assert not first & second and len(first | second) == 12
    table = env.run("history", "--group", "rollout-7").out
    assert table.count("rollout-7 (") == 2 and "GROUP" in table.splitlines()[0]
    shown = env.run("show", runs[0]["id"]).out
    assert "group     rollout-7, slice" in shown and "2 of 2 slices recorded (1/2, 2/2), 12 host(s)" in shown
    assert env.run("history", "--group", "other").out.splitlines()[1:] == []


def test_postgres_wrong_password_or_no_server_warns_names_the_url_masked_and_the_run_goes_on(
        postgres: pg.PrivatePostgres, tmp_path: Path) -> None:
    wrong = postgres.url(password="not-the-Pw-77")
    nobody = f"postgresql://{pg.ROLE}:also-Secret-88@127.0.0.1:{postgres.port + 1 if postgres.port < 65535 else 1}/x"
    for url, cause in ((wrong, "password authentication failed"), (nobody, "connection")):
        env = Project(tmp_path / cause.split()[0], url, hosts=2)
        res = env.run("play", "site.yml", "-i", "inv.yml")
        assert res.rc == 0, res.out + res.err
        assert env.marked() == ["node00", "node01"]  # the run went on
        masked = url.replace(url.split(":")[2].split("@")[0], "***")
        assert f"WARNING: run history not recorded in {masked}: " in res.err and cause in res.err, res.err
        assert "the run goes on" in res.err
        secret = url.split(":")[2].split("@")[0]
        assert secret not in res.out + res.err
        # --history-required: nothing is touched, exit 1 (the environment, not the inputs, is wrong)
        env.marks.unlink()
        required = env.run("play", "site.yml", "-i", "inv.yml", "--history-required")
        assert required.rc == 1, required.out + required.err
        assert f"run history {masked} unavailable (--history-required)" in required.err
        assert "nothing was run" in required.err and secret not in required.out + required.err
        assert env.marked() == []
        listing = env.run("history")
        assert listing.rc == 1 and f"cannot read the run history {masked}" in listing.err
        assert secret not in listing.err


def test_postgres_password_never_printed_logged_or_stored(pg_url: str, tmp_path: Path) -> None:
    """The URL's password, given by --history and by $OPSRUNNER_HISTORY: not in the database's
    rows, the output at -vvv, the JSON events, the errors, the schedule files and units."""
    secret = pg.PASSWORD
    env = Project(tmp_path, "", hosts=2)
    events = tmp_path / "events.jsonl"
    by_flag = env.run("play", "site.yml", "-i", "inv.yml", "-vvv", "--history", pg_url, "--json-events", str(events))
    assert by_flag.rc == 0, by_flag.err
    env.vars["OPSRUNNER_HISTORY"] = pg_url
    by_env = env.run("play", "site.yml", "-i", "inv.yml", "-vvv")
    failing = env.run("play", "site.yml", "-i", "inv.yml", "--slice", "9/2")  # an error message
    assert by_env.rc == 0 and failing.rc == 4 and "--slice '9/2'" in failing.err
    assert env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    scheduled = env.run("schedule", "run", "nightly")
    listed = env.run("schedule", "list")
    assert scheduled.rc == 0 and listed.rc == 0 and "nightly" in listed.out and "ok (" in listed.out, listed.out
    history = env.run("history", "--json")
    shown = env.run("show", "last", "--json")
    runs = json.loads(history.out)
    # the refused --slice run is recorded too (bad input, exit 4), its command masked as the others'
    assert len(runs) == 4 and any("--history 'postgresql://opsrunner:***@127.0.0.1:" in r["command"] for r in runs)
    texts = [r.out + r.err for r in (by_flag, by_env, failing, scheduled, listed, history, shown)]
    texts += [events.read_text()]
    texts += [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and "proj" not in p.parts]
    texts += [str(row) for row in _rows(pg_url, "SELECT row_to_json(r)::text FROM runs r")]
    texts += [str(row) for row in _rows(pg_url, "SELECT row_to_json(r)::text FROM results r")]
    assert "sleep" not in secret and all(secret not in t for t in texts)


def test_postgres_and_sqlite_read_the_same_through_one_interface(pg_url: str, tmp_path: Path) -> None:
    """One run recorded by each backend: the same RunRow back (the schema is one)."""
    from opsrunner.history.store import RunRow, TaskRow

    got = []
    for where in (pg_url, str(tmp_path / "h.db")):
        store = open_history(where)
        run = RunRow(id="20261203-120000-abcd", started=1.0e9, user="u", command="opsrunner play x",
                     playbook="/p/site.yml", git_dirty=True, check_mode=True, run_group="g", slice="1/3",
                     extra_vars={"a": 1}, options={"limit": "web"})
        store.start_run(run)
        store.add_tasks(run.id, [(1, TaskRow("p", "t", "shell", "h1", "ok", True, False, "m", "", 0.5))])
        store.add_note(run.id, "a note")
        store.finish_run(run.id, 0, {"h1": {"ok": 1}})
        found = store.run("20261203-120000")
        assert found is not None
        got.append((found.as_dict() | {"ended": None, "heartbeat": None},
                    [r.id for r in store.runs(group="g", result="dry-run", host="h1")],
                    sorted(store.durations()), store.last_run_id(), store.prune(0)))
        store.close()
    assert got[0] == got[1]
    assert got[0][1] == ["20261203-120000-abcd"] and got[0][4] == 1


def test_postgres_dashboard_reader_refuses_an_unmigrated_database(postgres: pg.PrivatePostgres) -> None:
    url = postgres.new_database("not_migrated")
    with pytest.raises(Exception, match="schema version 0, expected"):
        HistoryStore(url, read_only=True)
    open_history(url).close()
    HistoryStore(url, read_only=True).close()


def test_postgres_history_served_by_a_real_dashboard(pg_url: str, tmp_path: Path) -> None:
    """Two controllers (their own project folders) record into one PostgreSQL; a real
    `opsrunner serve --history URL` lists both runs, and the URL's password shows nowhere."""
    from tests.web.dashboard import Project as WebProject
    from tests.web.dashboard import serving

    password = pg_url.split(":")[2].split("@")[0]
    first, second = WebProject(tmp_path / "a"), WebProject(tmp_path / "b")
    for project in (first, second):
        project.env["OPSRUNNER_HISTORY"] = pg_url
    ok = first.play("-l", "web1")
    failed = second.play("-e", "break_it=yes")
    with serving(first, "--history", pg_url) as server:
        assert password not in server.url
        runs = server.get("/api/runs").json()["runs"]
        assert [r["id"] for r in runs] == [failed, ok]
        assert [r["label"] for r in runs] == ["failed (exit 2)", "ok"]
        detail = server.get(f"/api/runs/{failed}").json()
        assert [t["task"] for t in detail["tasks"]["web2"]] == ["Say hello", "Break with the token"]
        for path in ("/", "/api/runs", f"/runs/{failed}", "/hosts"):
            page = server.get(path)
            assert page.status == 200 and password not in page.text, path
