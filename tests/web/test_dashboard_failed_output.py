"""The dashboard shows a failed command's recorded output (the last lines of its stdout and
stderr) on the run's page and in its JSON, escaped; a task that did not fail has none."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_yaml
from tests.web.dashboard import Project, serving


def test_a_failed_commands_output_is_on_the_runs_page_and_in_its_json(tmp_path: Path) -> None:
    project = Project(tmp_path)
    write_yaml(project.dir / "site.yml", [{"hosts": "web1", "gather_facts": False, "tasks": [
        {"name": "Fine", "shell": "echo fine-out"},
        {"name": "Broken", "shell": "echo '<b>out-line-T2X</b>'; echo err-line-T2X >&2; exit 1"}]}])
    run_id = project.play()
    with serving(project) as server:
        detail = server.get(f"/api/runs/{run_id}").json()
        fine, broken = detail["tasks"]["web1"]
        assert (fine["stdout_tail"], fine["stderr_tail"]) == ("", "")
        assert (broken["stdout_tail"], broken["stderr_tail"]) == ("<b>out-line-T2X</b>", "err-line-T2X")
        page = server.get(f"/runs/{run_id}").text
        assert '<pre class="log-tail stdout-tail">&lt;b&gt;out-line-T2X&lt;/b&gt;</pre>' in page
        assert '<pre class="log-tail stderr-tail">err-line-T2X</pre>' in page and "fine-out" not in page
