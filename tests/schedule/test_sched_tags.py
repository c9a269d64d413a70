"""`schedule add -t/--skip-tags`: as `play` and `check` take them; checked with them at add,
kept in the schedule file, applied by every run, shown by `schedule list`."""

from __future__ import annotations

from tests.conftest import write_yaml
from tests.helpers import ProjectEnv


def test_a_schedule_runs_only_its_tags(env: ProjectEnv) -> None:
    write_yaml(env.project / "tagged.yml", [{"hosts": "all", "tasks": [
        {"name": "restart", "debug": {"msg": "restarting"}, "tags": ["restart"]},
        {"name": "slow", "debug": {"msg": "slow check"}, "tags": ["restart", "slow"]},
        {"name": "other", "debug": {"msg": "other work"}}]}])
    add = env.run("schedule", "add", "tagged", "tagged.yml", "-i", "inv.yml", "--at", "daily",
                  "-t", "restart", "--skip-tags", "slow")
    assert add.rc == 0, add.err
    res = env.run("schedule", "run", "tagged")
    assert res.rc == 0, res.err
    assert "TASK [restart]" in res.out and "TASK [slow]" not in res.out and "TASK [other]" not in res.out
    assert [t["task"] for t in env.history()[0]["tasks"]] == ["restart"]
    listed = env.run("schedule", "list")
    assert listed.out.splitlines()[1].endswith("  tagged.yml --tags=restart --skip-tags=slow"), listed.out

