"""A dry run (`play --check`) never stands for a host's state: after a real run failed on a
host, a later dry run of the same playbook leaves the dashboard's hosts verdict (`/api/hosts`,
`/hosts`) at the real failure, shows the dry run beside it, marked check, and keeps it out
of the durations chart; the runs list and `opsrunner history` still list it, marked. Real
plays on hosts of `connection: local`, a real `opsrunner serve`, on SQLite and on the
suite's private PostgreSQL (tests/pg.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.web.dashboard import Project, serving


def _check_runs_never_replace_real_verdicts(project: Project, *serve_args: str) -> None:
    failed = project.play("-e", "break_it=yes")  # a real run: fails on web1 and web2
    assert project.run("play", "site.yml", "-i", "inv.yml", "--check").rc == 0
    dry = project.play("-l", "web1", "--check")  # a second dry run, the newest on web1
    write_yaml(project.dir / "other.yml", [{"hosts": "web2", "gather_facts": False,
                                            "tasks": [{"shell": "echo other"}]}])
    assert project.run("play", "other.yml", "-i", "inv.yml", "--check").rc == 0
    only_dry = project.run("history", "--json", "-n", "1")
    only_dry_id = re.search(r'"id": "([^"]+)"', only_dry.out)
    assert only_dry_id, only_dry.out
    # the CLI lists the dry runs, marked as such
    listing = project.run("history").out.splitlines()[1:]
    assert [line.split()[0] for line in listing][:2] == [only_dry_id.group(1), dry] and len(listing) == 4
    assert [", dry run" in line for line in listing] == [True, True, True, False]
    assert "failed (2)" in listing[3] and listing[3].split()[0] == failed
    with serving(project, *serve_args) as server:
        hosts = {(h["host"], h["playbook"]): h for h in server.get("/api/hosts").json()["hosts"]}
        assert sorted(hosts) == [("web1", "site.yml"), ("web2", "other.yml"), ("web2", "site.yml")]
        web1, web2 = hosts[("web1", "site.yml")], hosts[("web2", "site.yml")]
        assert (web1["verdict"], web1["run_id"]) == ("failed", failed)
        assert (web2["verdict"], web2["run_id"]) == ("failed", failed)
        assert web1["dry_run"]["run_id"] == dry and web1["dry_run"]["verdict"] == "ok"
        assert web2["dry_run"]["verdict"] == "ok" and web2["dry_run"]["run_id"] not in (dry, failed)
        other = hosts[("web2", "other.yml")]
        assert other["verdict"] is None and other["run_id"] is None  # only a dry run: no verdict
        assert other["dry_run"]["run_id"] == only_dry_id.group(1)
        page = server.get("/hosts").text
        row = re.search(r'<tr class="verdict-(\w+)">\s*<td>web1</td>.*?</tr>', page, re.S)
        assert row and row.group(1) == "failed" and f'<a href="/runs/{failed}">' in row.group(0)
        assert 'class="badge check"' in row.group(0) and f'<a href="/runs/{dry}">' in row.group(0)
        # the runs list still lists the dry runs, marked
        runs = {r["id"]: r for r in server.get("/api/runs").json()["runs"]}
        assert len(runs) == 4 and runs[dry]["dry_run"] is True and runs[dry]["label"] == "dry run"
        assert runs[failed]["dry_run"] is False
        index = server.get("/").text
        dry_row = re.search(rf'<tr class="[^"]*dry-run">\s*<td><a href="/runs/{dry}">.*?</tr>', index, re.S)
        assert dry_row and 'class="badge check"' in dry_row.group(0)
        # the durations chart counts the real run only
        assert f"<title>{failed}:" in index and f"<title>{dry}:" not in index
        assert "durations of its last 1 real runs" in index and "other.yml" not in index.split('id="runs"')[0]


def test_check_runs_never_replace_a_hosts_real_verdict_sqlite(tmp_path: Path) -> None:
    _check_runs_never_replace_real_verdicts(Project(tmp_path))


@pytest.mark.usefixtures("postgres")
def test_check_runs_never_replace_a_hosts_real_verdict_postgres(pg_url: str, tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.env["OPSRUNNER_HISTORY"] = pg_url
    _check_runs_never_replace_real_verdicts(project, "--history", pg_url)
