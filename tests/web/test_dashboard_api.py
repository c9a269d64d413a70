"""`opsrunner serve` over HTTP: the JSON API's content, filters, paging and errors, the
schedules and hosts, masking, escaping, read-only, and the token off the loopback address."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from opsrunner.history.store import HistoryStore, RunRow, TaskRow
from tests.helpers import user_crontab
from tests.web.dashboard import Project, serving

SECRET = "s3cr3t-dashboard-value"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_api_runs_and_a_failed_runs_page_from_real_plays(project: Project) -> None:
    ok = project.play("-l", "web1", "-t", "never", "-C")
    failed = project.play("-e", f"api_token={SECRET} break_it=yes")
    with serving(project) as server:
        listing = server.get("/api/runs")
        assert listing.status == 200 and listing.headers["content-type"] == "application/json"
        runs = listing.json()["runs"]
        assert [r["id"] for r in runs] == [failed, ok]  # newest first
        assert runs[0]["label"] == "failed (exit 2)" and runs[0]["hosts"] == ["web1", "web2"]
        assert runs[1]["label"] == "dry run" and runs[1]["dry_run"] is True
        detail = server.get(f"/api/runs/{failed}").json()
        assert detail["extra_vars"] == {"api_token": "********", "break_it": "yes"}
        assert "api_token=********" in detail["command"]
        assert [t["task"] for t in detail["tasks"]["web2"]] == ["Say hello", "Break with the token"]
        broken = detail["tasks"]["web1"][1]
        assert broken["status"] == "failed" and broken["msg"] == "cannot go on with ********"
        assert detail["recap"]["web1"]["failed"] == 1 and detail["finished"] is True
        options = server.get(f"/api/runs/{ok}").json()
        assert options["limit"] == "web1" and options["tags"] == ["never"]
        page = server.get(f"/runs/{failed}")
        assert page.status == 200 and "cannot go on with ********" in page.text
        for path in ("/", "/api/runs", f"/api/runs/{failed}", f"/runs/{failed}", "/hosts", "/api/hosts"):
            assert SECRET not in server.get(path).text, path
        hosts = server.get("/api/hosts").json()["hosts"]
        assert [(h["host"], h["verdict"], h["run_id"]) for h in hosts] == [("web1", "failed", failed),
                                                                           ("web2", "failed", failed)]


def _recorded(db: Path, count: int) -> list[str]:
    """`count` finished runs written straight into the history, one a second apart, oldest first;
    every third one of schedule nightly, every fifth one failed, on web1 and web2 (or web3)."""
    store = HistoryStore(db)
    ids = []
    base = time.time() - count
    for n in range(count):
        run_id = f"20200101-000000-{n:04x}"
        store.start_run(RunRow(id=run_id, started=base + n, playbook="/srv/ops/site.yml", command="opsrunner play",
                               schedule="nightly" if n % 3 == 0 else None))
        host = "web3" if n % 2 else "web2"
        store.add_tasks(run_id, [(1, TaskRow("p", "Task", "shell", "web1", "ok", False, False, "", "", 0.1)),
                                 (2, TaskRow("p", "Task", "shell", host, "ok", False, False, "", "", 0.1))])
        store.finish_run(run_id, 2 if n % 5 == 0 else 0, {"web1": {"ok": 1}, host: {"ok": 1}})
        ids.append(run_id)
    store.close()
    return ids


def test_api_filters_and_pages(project: Project) -> None:
    ids = _recorded(project.db, 120)
    with serving(project) as server:
        first = server.get("/api/runs").json()
        assert [r["id"] for r in first["runs"]] == ids[::-1][:50] and first["has_older"] is True
        third = server.get("/api/runs?page=3").json()
        assert [r["id"] for r in third["runs"]] == ids[::-1][100:] and third["has_older"] is False
        nightly = server.get("/api/runs?schedule=nightly&result=failed").json()["runs"]
        assert [r["id"] for r in nightly] == [i for n, i in enumerate(ids) if n % 15 == 0][::-1]
        on_web3 = server.get("/api/runs?host=web3&playbook=site.yml").json()["runs"]
        assert [r["id"] for r in on_web3] == [i for n, i in enumerate(ids) if n % 2][::-1][:50]
        assert server.get("/api/runs?playbook=other.yml").json()["runs"] == []
        ok_runs = [i for n, i in enumerate(ids) if n % 5][::-1]
        page = server.get("/?result=ok&page=2")
        assert page.status == 200 and ok_runs[50] in page.text and ok_runs[49] not in page.text
        assert 'href="/?result=ok&amp;page=1"' in page.text and "page=3" not in page.text
        for bad, why in (("result=maybe", "result must be one of"), ("page=0", "page must be 1"),
                         ("page=x", "page must be a number")):
            answer = server.get(f"/api/runs?{bad}")
            assert answer.status == 400 and why in answer.json()["error"], bad


def test_unknown_and_ambiguous_ids_are_404_with_a_json_error(project: Project) -> None:
    ids = _recorded(project.db, 3)
    with serving(project) as server:
        missing = server.get("/api/runs/19990101-nothing")
        assert missing.status == 404 and missing.json() == {"error": "no run '19990101-nothing'", "candidates": []}
        ambiguous = server.get("/api/runs/20200101-000000-000")
        assert ambiguous.status == 404 and ambiguous.json()["candidates"] == ids[::-1]
        assert server.get(f"/api/runs/{ids[1][:-1]}1").json()["id"] == ids[1]
        assert server.get("/api/runs/last").json()["id"] == ids[-1]
        page = server.get("/runs/20200101-000000-000")
        assert page.status == 404 and all(f'href="/runs/{i}"' in page.text for i in ids)
        assert server.get("/no/such/page").status == 404


def test_no_endpoint_writes_and_every_answer_is_guarded(project: Project) -> None:
    ids = _recorded(project.db, 5)

    def database() -> str:
        """The database's content: the file, and what its write-ahead log holds (sqlite's own -shm aside)."""
        wal = project.root / "history.db-wal"
        return hashlib.sha256(project.db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).hexdigest()

    with serving(project) as server:
        before = database()
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = server.get(f"/api/runs/{ids[0]}", method=method)
            assert answer.status == 405 and answer.json() == {"error": "the dashboard is read-only"}
        for path in ("/", f"/runs/{ids[0]}", "/schedules", "/hosts", "/api/runs", "/api/schedules", "/api/hosts"):
            answer = server.get(path)
            assert answer.status == 200, path
            assert "script-src 'self'" in answer.headers["content-security-policy"]
        assert database() == before


def test_task_names_and_messages_are_escaped(project: Project) -> None:
    store = HistoryStore(project.db)
    store.start_run(RunRow(id="20200101-000000-aaaa", started=time.time(), playbook="<b>pb</b>.yml"))
    store.add_tasks("20200101-000000-aaaa", [(1, TaskRow("p", "<script>alert('x')</script>", "shell", "h<i>",
                                                          "failed", False, False, "<img src=x onerror=alert(1)>",
                                                          "& diagnosis", 0.1))])
    store.finish_run("20200101-000000-aaaa", 2, {"h<i>": {"failed": 1}})
    store.close()
    with serving(project) as server:
        for path in ("/", "/runs/20200101-000000-aaaa", "/hosts"):
            text = server.get(path).text
            assert "<script>alert" not in text and "<img" not in text and "<b>pb" not in text and "h<i>" not in text
        page = server.get("/runs/20200101-000000-aaaa").text
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page and "&lt;img src=x" in page


def test_schedules_by_next_run_with_timer_state_and_last_result(project: Project) -> None:
    user_crontab(project.root, project.env)  # cron's lines in a user's crontab: active
    assert project.run("schedule", "add", "hourly-check", "site.yml", "-i", "inv.yml", "--at", "hourly",
                       "--cron").rc == 0
    assert project.run("schedule", "add", "daily-restart", "site.yml", "-i", "inv.yml", "--at", "daily",
                       "--cron", "--notify", "json://127.0.0.1:9/hook?token=" + SECRET).rc == 0
    assert project.run("schedule", "add", "review-only", "site.yml", "-i", "inv.yml", "--at", "minutely").rc == 0
    assert project.run("schedule", "run", "daily-restart").rc == 0
    with serving(project) as server:
        found = server.get("/api/schedules").json()["schedules"]
        # By next run; from 23:00 to midnight the hourly and the daily one both next run at 00:00.
        assert [s["next_run"] for s in found[:2]] == sorted(s["next_run"] for s in found[:2])
        by_name = {s["name"]: s for s in found}
        hourly, daily, review = by_name["hourly-check"], by_name["daily-restart"], by_name["review-only"]
        assert found[2] is not None and found[2]["name"] == "review-only"
        assert [hourly["timer_active"], daily["timer_active"], review["timer_active"]] == [True, True, False]
        assert hourly["next_run"] <= daily["next_run"] and review["next_run"] == ""
        assert daily["last_run"]["label"] == "ok" and hourly["last_run"] is None
        page = server.get("/schedules").text
        assert hourly["next_run"] in page and "cron: active" in page and "systemd: inactive" in page
        assert SECRET not in page and SECRET not in server.get("/api/schedules").text


def test_another_address_needs_a_token(project: Project, tmp_path: Path) -> None:
    refused = project.run("serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.rc == 5 and "needs --token-file" in refused.err
    token = tmp_path / "token"
    token.write_text("short\n")
    assert "at least 16 characters" in project.run("serve", "--token-file", str(token)).err
    token.write_text("a-token-of-thirty-two-characters\n")
    with serving(project, "--token-file", str(token)) as server:
        assert server.get("/api/runs").status == 401
        wrong = {"Authorization": "Bearer wrong-token-of-thirty-two-chars"}
        assert server.get("/api/runs", headers=wrong).status == 401
        good = server.get("/api/runs", headers={"Authorization": "Bearer a-token-of-thirty-two-characters"})
        assert good.status == 200 and good.json()["runs"] == []
        first = server.get("/?token=a-token-of-thirty-two-characters")
        assert first.status == 200 and "opsrunner_token=" in first.headers["set-cookie"]
        cookie = first.headers["set-cookie"].split(";")[0]
        assert server.get("/hosts", headers={"Cookie": cookie}).status == 200


def test_a_schedule_file_that_does_not_load_is_an_error_with_its_position(project: Project) -> None:
    assert project.run("schedule", "add", "edited", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    path = project.root / "schedules" / "edited.yml"
    path.write_text(path.read_text().replace("on_calendar: daily", "on_calendar: Sun 25:00"))
    with serving(project) as server:
        answer = server.get("/api/schedules")  # listed with why, not a 500 that hides the others
        assert answer.status == 200
        (edited,) = answer.json()["schedules"]
        assert f"{path}:" in edited["error"] and "(at on_calendar)" in edited["error"]
        assert server.get("/api/runs").status == 200  # the rest still answers


def test_a_failed_verifys_diagnosis_and_log_lines_are_shown_once(project: Project) -> None:
    """The page shows a task's diagnosis and its log's last lines in their own places: the
    message it shows beside them no longer holds them too (they were on the page twice). A
    message whose lines differ from the kept tail keeps them."""
    msg = ("processes: expected exactly 1, got 0\ndiagnosis: crashed: exit code 1\n"
           "last lines of /w/train.log:\n  | step 3\n  | RuntimeError: boom")
    rows = [TaskRow("p", "Verify", "verify", "h1", "failed", False, False, msg, "crashed: exit code 1", 0.1,
                    log_tail="step 3\nRuntimeError: boom"),
            TaskRow("p", "Verify", "verify", "h2", "failed", False, False, msg, "crashed: exit code 1", 0.1,
                    log_tail="other lines")]
    store = HistoryStore(project.db)
    store.start_run(RunRow(id="20200101-000000-bbbb", started=time.time(), playbook="pb.yml"))
    store.add_tasks("20200101-000000-bbbb", list(enumerate(rows, 1)))
    store.finish_run("20200101-000000-bbbb", 2, {"h1": {"failed": 1}, "h2": {"failed": 1}})
    store.close()
    with serving(project) as server:
        tasks = server.get("/api/runs/20200101-000000-bbbb").json()["tasks"]
        one, two = tasks["h1"][0], tasks["h2"][0]
        assert one["msg"] == two["msg"] == msg  # the API's message is the recorded one
        assert (one["shown_msg"], one["log_header"]) == ("processes: expected exactly 1, got 0",
                                                         "last lines of /w/train.log:")
        assert (one["diagnosis"], one["log_tail"]) == ("crashed: exit code 1", "step 3\nRuntimeError: boom")
        assert (two["shown_msg"], two["log_header"]) == (
            "processes: expected exactly 1, got 0\nlast lines of /w/train.log:\n  | step 3\n  | RuntimeError: boom", "")
        page = server.get("/runs/20200101-000000-bbbb").text
        assert page.count("RuntimeError: boom") == 2 and page.count("diagnosis: crashed") == 2  # once a host
        assert page.count("last lines of /w/train.log:") == 2  # the log is named over its lines
