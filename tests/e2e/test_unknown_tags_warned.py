"""`--tags` / `--skip-tags` naming a tag no task has (a typo) runs as ansible-core runs it (the
`always` tasks alone, exit 0) but is no longer silent: a warning names the unknown tag(s) and
the tags the playbook's tasks have, sorted."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched

PB = [{"hosts": "h1", "tasks": [
    {"name": "Kill", "shell": "touch {{ out }}/kill", "tags": ["kill"]},
    {"name": "Start", "shell": "touch {{ out }}/start", "tags": ["start", "deploy"]},
    {"name": "Verify", "shell": "touch {{ out }}/verify", "tags": ["always", "verify"]},
]}]


def test_a_tag_no_task_has_is_warned_about_and_the_run_goes_on_as_before(tmp_path: Path) -> None:
    env = local_project(tmp_path)
    write_yaml(env.project / "site.yml", PB)
    res = play(env, "site.yml", "--tags", "verfy")
    assert res.rc == 0, res.out + res.err
    assert "[WARNING]: --tags 'verfy' matches no task; the playbook's tags: deploy, kill, start, verify\n" in res.err
    assert touched(env) == ["verify"]  # the always task alone, as ansible-core runs it


def test_skip_tags_and_several_unknown_tags_are_named_and_known_ones_are_not(tmp_path: Path) -> None:
    env = local_project(tmp_path)
    write_yaml(env.project / "site.yml", PB)
    res = play(env, "site.yml", "--tags", "start,nosuch,all", "--skip-tags", "kil,zz")
    assert res.rc == 0, res.out + res.err
    warnings = [line for line in res.err.splitlines() if line.startswith("[WARNING]")]
    assert warnings == [
        "[WARNING]: --tags 'nosuch' matches no task; the playbook's tags: deploy, kill, start, verify",
        "[WARNING]: --skip-tags 'kil', 'zz' match no task; the playbook's tags: deploy, kill, start, verify"]
    assert play(env, "site.yml", "--tags", "start").err == ""
