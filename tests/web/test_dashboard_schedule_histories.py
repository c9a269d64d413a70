"""The schedules page shows each schedule's last run from the run history its runs are
recorded in (`schedule add --history`; the dashboard's own where its file names none), as
`schedule list` does: a run in another history is shown without a link (this dashboard has
no page of it), a history that cannot be read is said on its schedules' rows (its password
masked) and hides no other schedule, and each history is opened once a page load. Every run
is a real scheduled run; the page is read in a real headless Chromium."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests import pg
from tests.helpers import cli_subprocess
from tests.web.dashboard import Project, Server, serving, wait_until


@pytest.fixture
def project(tmp_path: Path) -> Project:
    p = Project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    # no password reaches libpq but what a test gives it (no ~/.pgpass of the machine's)
    p.env.update(HOME=str(home), PGPASSFILE=str(home / ".pgpass"), PGPASSWORD="")
    return p


def _add(project: Project, name: str, *history: str) -> None:
    added = project.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "daily", "--cron", *history)
    assert added.rc == 0, added.err


def _scheduled_run(project: Project, name: str, history: str, **env: str) -> str:
    """`schedule run NAME` (as its timer runs it); the id of the run it recorded in `history`."""
    ran = cli_subprocess("schedule", "run", name, cwd=project.dir, env={**project.env, **env}, timeout=180)
    assert ran.rc == 0, ran.out + ran.err
    listing = cli_subprocess("history", "--json", "-n", "1", "--history", history, cwd=project.dir,
                             env={**project.env, **env})
    [run] = json.loads(listing.out)
    assert run["schedule"] == name
    return str(run["id"])


def _rows(server: Server, page: Any) -> dict[str, Any]:
    """The schedules page in the browser: each row's locator by schedule name."""
    page.goto(server.url + "/schedules")
    rows = page.locator("#schedules tbody tr")
    return {rows.nth(i).locator("td").first.inner_text(): rows.nth(i) for i in range(rows.count())}


def _listed(project: Project) -> tuple[dict[str, list[str]], str]:
    """`schedule list`'s rows by name (split on blanks) and its warnings."""
    res = cli_subprocess("schedule", "list", cwd=project.dir, env=project.env)
    assert res.rc == 0, res.err
    return {line.split()[0]: line.split() for line in res.out.splitlines()[1:]}, res.err


def test_each_schedule_shows_the_last_run_of_the_history_its_runs_go_to(project: Project, page: Any) -> None:
    other, corrupt, fresh = (project.root / f for f in ("other.db", "corrupt.db", "fresh.db"))
    _add(project, "local-one")
    _add(project, "moved")  # first recorded in the dashboard's history, then moved to other.db
    stale = _scheduled_run(project, "moved", str(project.db))
    assert project.run("schedule", "remove", "moved").rc == 0
    _add(project, "moved", "--history", str(other))
    _add(project, "corrupt-file", "--history", str(corrupt))
    _add(project, "fresh-file", "--history", str(fresh))
    _add(project, "idle")
    local = _scheduled_run(project, "local-one", str(project.db))
    moved = _scheduled_run(project, "moved", str(other))
    corrupt.write_bytes(b"\x00\x17 not a database at all " * 200)
    with serving(project) as server:
        found = {s["name"]: s for s in server.get("/api/schedules").json()["schedules"]}
        assert found["local-one"]["last_run"]["id"] == local and found["local-one"]["history_served"] is True
        assert found["moved"]["last_run"]["id"] == moved and found["moved"]["history"] == str(other)
        assert found["moved"]["history_served"] is False and found["moved"]["history_error"] is None
        assert found["corrupt-file"]["last_run"] is None
        assert found["corrupt-file"]["history_error"] == "DatabaseError: file is not a database"
        assert found["fresh-file"]["last_run"] is None and found["fresh-file"]["history_missing"] is True
        assert found["idle"]["last_run"] is None and found["idle"]["history_error"] is None
        rows = _rows(server, page)
        assert sorted(rows) == ["corrupt-file", "fresh-file", "idle", "local-one", "moved"]
        last = {name: row.locator("td.last-run") for name, row in rows.items()}
        link = last["local-one"].locator("a")
        assert link.inner_text() == "ok" and link.get_attribute("href") == f"/runs/{local}"
        assert server.get(f"/runs/{local}").status == 200
        assert last["moved"].locator("a").count() == 0  # its run is not in this dashboard's history
        assert last["moved"].inner_text().startswith("ok 20")
        assert last["moved"].inner_text().endswith(f" (run {moved} in history {other}, not shown here)")
        assert stale not in rows["moved"].inner_text()
        assert last["corrupt-file"].inner_text() == \
            f"history {corrupt} unreadable: DatabaseError: file is not a database"
        assert last["fresh-file"].inner_text() == f"no run recorded: history {fresh} does not exist"
        assert last["idle"].inner_text() == "never ran"
    assert not fresh.exists()  # the dashboard made none
    listed, warnings = _listed(project)  # `schedule list` reads the same last runs
    assert listed["moved"][-2:] == [f"({moved})", "site.yml"] and listed["local-one"][-2:] == [f"({local})",
                                                                                               "site.yml"]
    assert listed["corrupt-file"][-3:] == ["unknown", "unknown", "site.yml"]
    assert listed["fresh-file"][-3:] == listed["idle"][-3:] == ["-", "-", "site.yml"]
    assert warnings == f"WARNING: cannot read the run history {corrupt}: DatabaseError: file is not a database; " \
                       "LAST RUN and RESULT are unknown\n"


def _sessions(postgres: pg.PrivatePostgres, database: str) -> int:
    """Connections ever made to `database` (PostgreSQL counts each when its session ends)."""
    return int(postgres.psql(f"SELECT sessions FROM pg_stat_database WHERE datname = '{database}'").strip())


def _settled_sessions(postgres: pg.PrivatePostgres, database: str) -> int:
    seen = [-1, _sessions(postgres, database)]
    while seen[-1] != seen[-2]:  # ended sessions are counted a moment later
        time.sleep(0.5)
        seen.append(_sessions(postgres, database))
    return seen[-1]


def test_a_postgres_history_without_its_password_is_said_and_opened_once_a_page(
        project: Project, page: Any, postgres: pg.PrivatePostgres) -> None:
    url = postgres.new_database("t_web_sched_histories")
    bare = url.replace(f":{pg.PASSWORD}@", "@")
    for name in ("shared-a", "shared-b"):
        _add(project, name, "--history", url)  # kept without its password
    _add(project, "local-one")
    local = _scheduled_run(project, "local-one", str(project.db))
    shared = _scheduled_run(project, "shared-a", url, PGPASSWORD=pg.PASSWORD)
    with serving(project) as server:
        found = {s["name"]: s for s in server.get("/api/schedules").json()["schedules"]}
        for name in ("shared-a", "shared-b"):
            assert found[name]["last_run"] is None and found[name]["history"] == bare
            assert found[name]["history_error"].startswith("OperationalError: ")
            assert "password" in found[name]["history_error"]
        assert found["local-one"]["last_run"]["id"] == local
        rows = _rows(server, page)
        unreadable = rows["shared-a"].locator("td.last-run").inner_text()
        assert unreadable.startswith(f"history {bare} unreadable: OperationalError: ")
        assert rows["shared-b"].locator("td.last-run").inner_text() == unreadable.replace("shared-a", "shared-b")
        assert rows["local-one"].locator("td.last-run a").inner_text() == "ok"
        assert pg.PASSWORD not in page.content() + server.get("/api/schedules").text
        pgpass = Path(project.env["PGPASSFILE"])  # where the dashboard's libpq finds the password
        pgpass.write_text(f"127.0.0.1:{postgres.port}:*:{pg.ROLE}:{pg.PASSWORD}\n")
        pgpass.chmod(0o600)
        before = _settled_sessions(postgres, "t_web_sched_histories")
        rows = _rows(server, page)
        assert wait_until(lambda: _sessions(postgres, "t_web_sched_histories") > before)
        assert _settled_sessions(postgres, "t_web_sched_histories") == before + 1  # both schedules: one connection
        assert rows["shared-a"].locator("td.last-run").inner_text().endswith(f" (run {shared} in history {bare}, "
                                                                             "not shown here)")
        assert rows["shared-b"].locator("td.last-run").inner_text() == f"never ran (history {bare})"
        assert pg.PASSWORD not in page.content()
    project.env["PGPASSFILE"] = str(project.root / "none")
    listed, warnings = _listed(project)  # `schedule list` says the same, once per history
    assert listed["shared-a"][-3:] == listed["shared-b"][-3:] == ["unknown", "unknown", "site.yml"]
    assert listed["local-one"][-2:] == [f"({local})", "site.yml"]
    [warning] = warnings.splitlines()
    assert warning.startswith(f"WARNING: cannot read the run history {bare}: OperationalError: ")
    with serving(project, "--history", url) as server:  # the dashboard of the shared history
        rows = _rows(server, page)
        link = rows["shared-a"].locator("td.last-run a")
        assert link.get_attribute("href") == f"/runs/{shared}" and server.get(f"/runs/{shared}").status == 200
        assert rows["local-one"].locator("td.last-run a").count() == 0
        assert f"(run {local} in history {project.db}, not shown here)" in rows["local-one"].inner_text()
        assert pg.PASSWORD not in page.content() + server.get("/api/schedules").text
