"""The hosts page and /api/hosts take a host's latest run as its latest run, one whose
controller was killed (SIGKILL) mid-run too: shown as aborted, with what its record shows,
never the ok of the run before it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import wait_for
from tests.web.aborted import in_wait, kill_controller, playing, slow_site
from tests.web.dashboard import Project, serving


def test_a_hosts_latest_run_aborted_is_its_verdict_with_what_its_record_shows(tmp_path: Path) -> None:
    project = Project(tmp_path)
    good = project.play()  # every host ok
    marker = slow_site(project)
    with playing(project, marker) as pid:
        assert wait_for(lambda: in_wait(project) is not None, 60, 0.2)
        aborted = in_wait(project)
        kill_controller(pid)
    assert aborted is not None and aborted != good
    with serving(project) as server:
        found = {h["host"]: h for h in server.get("/api/hosts").json()["hosts"] if h["playbook"] == "site.yml"}
        assert set(found) == {"web1", "web2"}, found
        for host in found.values():
            assert host["verdict"] == "aborted" and host["run_id"] == aborted, host
            assert host["aborted"] is True and host["counts"] == {"ok": 1, "changed": 1}, host
            assert host["recorded"] == "its record shows ok=1 changed=1", host
        page = server.get("/hosts").text
        assert page.count('<tr class="verdict-aborted">') == 2, page
        assert page.count("aborted (controller gone)<span class=\"recorded\">: its record shows ok=1 changed=1") == 2
        assert good not in page, page
