"""Arguments with no template whose schema problem names a template among the allowed forms
(`mode: "0999"`: "... or a {{ template }}", `port: 0`), or a key written as a template, are
left by the loader to the check after rendering: that check refuses them before any host is
touched (exit 4), though the loader marks other template-free arguments checked for good."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched


@pytest.mark.parametrize(("task", "says"), [
    ({"file": {"path": "OUT/f", "state": "touch", "mode": "0999"}},
     "'0999' is not valid here: expected string matching ^[0-7]{3,4}$ or integer or a {{ template }} (at file.mode)"),
    ({"wait_for": {"port": 0, "timeout": 1}},
     "0 is not valid here: expected integer >= 1 <= 65535 or a {{ template }} (at wait_for.port)"),
    ({"command": {"cmd": "echo hi", "{{ x }}": 1}}, "unknown key '{{ x }}' (at command.{{ x }})"),
], ids=["mode", "port", "templated-key"])
def test_a_plain_bad_argument_is_refused_before_any_task_runs(tmp_path: Path, task: dict[str, dict[str, object]],
                                                              says: str) -> None:
    env = local_project(tmp_path)
    module, args = next(iter(task.items()))
    plain = {k: v.replace("OUT", str(env.root / "out")) if isinstance(v, str) else v  # no template in any
             for k, v in args.items()}  # value: the loader's check would be its only one
    write_yaml(env.project / "site.yml", [{"hosts": "h1", "tasks": [
        {"name": "First", "shell": "touch {{ out }}/first"}, {module: plain}]}])
    res = play(env, "site.yml")
    assert res.rc == 4, res.out + res.err
    assert says in res.err and "nothing was run" in res.err
    assert touched(env) == []
