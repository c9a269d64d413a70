"""A real `opsrunner play` of the dashboard project's site.yml whose controller is SIGKILLed in
its second task, after its first changed both hosts: its row stays open, its controller gone
(aborted), for the dashboard tests of what an aborted run shows."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import kill_marked, sleep_marker, wait_for, write_yaml
from tests.helpers import opsrunner_process
from tests.web.dashboard import Project

WAIT = "Wait for the data"


def slow_site(project: Project) -> str:
    """site.yml, now a task that changes each host and one that blocks; the blocking `sleep`'s marker."""
    marker = sleep_marker()
    write_yaml(project.dir / "site.yml", [{"name": "Slow", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Say hello", "shell": "echo hello"},
        {"name": WAIT, "shell": f"sleep {marker}"}]}])
    return marker


def in_wait(project: Project) -> str | None:
    """The id of the run whose history row says it is in the blocking task, if any."""
    listing = project.run("history", "--json", "-n", "1")
    runs = json.loads(listing.out) if listing.rc == 0 and listing.out.strip() else []
    return str(runs[0]["id"]) if runs and runs[0].get("current_task") == WAIT else None


@contextlib.contextmanager
def playing(project: Project, marker: str) -> Iterator[int]:
    """site.yml played in a session of its own while the block runs; its pid. Its session and
    the blocking sleep are killed when the block ends."""
    try:
        with opsrunner_process("play", "site.yml", "-i", "inv.yml", cwd=project.dir, env=project.env,
                               start_new_session=True) as proc:
            yield proc.pid
    finally:
        kill_marked(marker)


def kill_controller(pid: int) -> None:
    """SIGKILL to the controller's session (it, its local agent, the task's sleep): no row closed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    assert wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", 10)
