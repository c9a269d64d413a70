"""`'stop' is selected_tag` is true exactly where a task tagged stop runs, under any --tags and
--skip-tags (the role's stop_follows): the selection decides it, not a template."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched

PB = [{"hosts": "h1", "tasks": [
    {"name": "Deploy", "shell": "touch {{ out }}/follows_{{ 'stop' is selected_tag }}", "tags": ["deploy"]},
    {"name": "Stop", "shell": "touch {{ out }}/stop", "tags": ["stop"]},
    {"name": "Start", "shell": "touch {{ out }}/start", "tags": ["start"]},
]}]


@pytest.mark.parametrize("args", [["--tags", "tagged"], ["--tags", "start"], ["--tags", "deploy"],
                                  ["--skip-tags", "stop"], [], ["--tags", "deploy,stop"]])
def test_selected_tag_says_whether_the_stop_runs(tmp_path: Path, args: list[str]) -> None:
    env = local_project(tmp_path)
    write_yaml(env.project / "site.yml", PB)
    res = play(env, "site.yml", *args)
    assert res.rc == 0, res.out + res.err
    ran = touched(env)
    follows = [name for name in ran if name.startswith("follows_")]
    if "deploy" in (args[1] if args else "deploy") or args[:1] == ["--skip-tags"] or args == ["--tags", "tagged"]:
        assert follows == [f"follows_{'stop' in ran}"], ran
    else:
        assert follows == [], ran
    assert ("stop" in ran) == (args in ([], ["--tags", "tagged"], ["--tags", "deploy,stop"]))
