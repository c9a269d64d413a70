"""Templated `no_log` and `tags` are held to what ansible-core holds them to.

`no_log` is a boolean keyword: ansible-core fails on a value that is not one of its boolean
words (`boolean(value, strict=True)`). A value known before the run (a literal, -e, play or
inventory vars) that is none of them is bad input (exit 4, file:line, the key); one known
only on the host fails the task there, its arguments and output hidden.

Templated `tags` are rendered with the play's vars and -e, as ansible-core does: a variable
that is undefined, or a value that names no tags, is bad input before any host is touched,
and --list-tasks selects (and shows) the tags the run selects.

Every host is a local one in the test's tmp dir; a host that ran a touch leaves a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched
from tests.helpers import ProjectEnv

SHOWN = "printed-Q7vz"  # what the no_log task prints; it is hidden unless no_log is false
ACCEPTED = "true/false, yes/no, on/off or 1/0"


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    return local_project(tmp_path)


NO_LOG_TASK = f"""
- hosts: all
  tasks:
    - name: touch
      command: touch {{{{ out }}}}/{{{{ inventory_hostname }}}}
    - name: maybe hidden
      command: echo {SHOWN}
      no_log: "{{{{ hide }}}}"
"""


def test_a_no_log_from_e_that_is_no_boolean_is_bad_input_before_any_host(env: ProjectEnv) -> None:
    pb = write_yaml(env.project / "nl.yml", NO_LOG_TASK)
    for command in ("play", "check"):
        res = env.run(command, "nl.yml", "-i", "inv.yml", "-e", "hide=abc", *(["-v"] if command == "play" else []))
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: {pb.name}:8:7: no_log '{{{{ hide }}}}': 'abc' is not a valid boolean" in res.err, res.err
        assert ACCEPTED in res.err and "(at no_log)" in res.err, res.err
        assert SHOWN not in res.out + res.err
    assert touched(env) == []


@pytest.mark.parametrize(("pb_text", "where"), [
    # a literal on the task
    ("- hosts: all\n  tasks:\n    - command: touch {{ out }}/x\n      no_log: maybe\n", "4:7"),
    # the play's, from the play's vars
    ("- hosts: all\n  vars: {hide: sometimes}\n  no_log: '{{ hide }}'\n  tasks:\n    - command: touch {{ out }}/x\n",
     "3:3"),
    # a block's, from the inventory's vars (every host has the same)
    ("- hosts: all\n  tasks:\n    - block:\n        - command: touch {{ out }}/x\n      no_log: '{{ out }}'\n",
     "4:11"),
])
def test_a_no_log_known_before_the_run_that_is_no_boolean_is_bad_input(env: ProjectEnv, pb_text: str,
                                                                        where: str) -> None:
    pb = write_yaml(env.project / "nl.yml", pb_text)
    res = play(env, "nl.yml")
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:{where}: no_log" in res.err and "is not a valid boolean" in res.err, res.err
    assert ACCEPTED in res.err and "(at no_log)" in res.err, res.err
    assert touched(env) == [] and "PLAY [" not in res.out


def test_a_no_log_known_only_on_the_host_that_is_no_boolean_fails_that_task_hidden(env: ProjectEnv) -> None:
    write_yaml(env.project / "nl.yml", f"""
- hosts: all
  tasks:
    - name: word
      command: echo abc
      register: r
    - name: maybe hidden
      command: echo {SHOWN}
      no_log: "{{{{ r.stdout }}}}"
    - name: touch
      command: touch {{{{ out }}}}/{{{{ inventory_hostname }}}}
""")
    res = play(env, "nl.yml", "-vvv")
    assert res.rc == 2, res.out + res.err
    assert SHOWN not in res.out + res.err
    assert "no_log '{{ r.stdout }}': 'abc' is not a valid boolean" in res.out, res.out
    assert ACCEPTED in res.out and res.out.count("fatal: [") == 2, res.out
    assert touched(env) == []  # the hosts stopped at the failed task


def test_a_no_log_naming_an_undefined_variable_is_bad_input(env: ProjectEnv) -> None:
    pb = write_yaml(env.project / "nl.yml", NO_LOG_TASK)
    res = play(env, "nl.yml")
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:8:7: no_log '{{{{ hide }}}}': " in res.err, res.err
    assert "'hide' is undefined (at no_log)" in res.err and touched(env) == [], res.err


def test_a_no_log_reading_the_loop_item_still_hides_the_task(env: ProjectEnv) -> None:
    """The item is not known when no_log is rendered for the task: hidden when in doubt."""
    write_yaml(env.project / "nl.yml", f"""
- hosts: all
  tasks:
    - name: looped
      command: echo {SHOWN} {{{{ item.n }}}}
      loop: [{{n: 1, hide: true}}]
      no_log: "{{{{ item.hide }}}}"
""")
    res = play(env, "nl.yml", "-v")
    assert res.rc == 0, res.out + res.err
    assert SHOWN not in res.out + res.err


@pytest.mark.parametrize(("word", "hidden"), [
    ("false", False), ("No", False), ("OFF", False), ("0", False),
    ("true", True), ("Yes", True), ("on", True), ("1", True),
])
def test_no_log_boolean_words_in_any_case_show_or_hide_the_output(env: ProjectEnv, word: str, hidden: bool) -> None:
    write_yaml(env.project / "nl.yml", NO_LOG_TASK)
    res = play(env, "nl.yml", "-e", f"hide={word}", "-v")
    assert res.rc == 0, res.out + res.err
    assert (SHOWN in res.out) is not hidden, res.out
    assert touched(env) == ["h1", "h2"]


TAGGED_PLAY = """
- hosts: all
  tags: "{{ mytag }}"
  tasks:
    - name: touch
      command: touch {{ out }}/{{ inventory_hostname }}
"""


def test_play_tags_naming_an_undefined_variable_are_bad_input_before_any_host(env: ProjectEnv) -> None:
    pb = write_yaml(env.project / "tg.yml", TAGGED_PLAY)
    for args in (["play"], ["play", "-t", "deploy"], ["play", "--skip-tags", "deploy"], ["check"],
                 ["play", "--list-tasks"]):
        res = env.run(*args, "tg.yml", "-i", "inv.yml")
        assert res.rc == 4, (args, res.out + res.err)
        assert f"ERROR: {pb.name}:3:3: tag '{{{{ mytag }}}}': " in res.err, (args, res.err)
        assert "'mytag' is undefined (at tags)" in res.err, (args, res.err)
    assert touched(env) == []


def test_task_tags_naming_an_undefined_variable_are_bad_input_at_their_line(env: ProjectEnv) -> None:
    pb = write_yaml(env.project / "tg.yml", """
- hosts: all
  tasks:
    - name: touch
      command: touch {{ out }}/{{ inventory_hostname }}
      tags: [always_here, "{{ stage }}"]
""")
    res = play(env, "tg.yml", "--skip-tags", "build")
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:6:7: tag '{{{{ stage }}}}': " in res.err, res.err
    assert "'stage' is undefined (at tags)" in res.err, res.err
    assert touched(env) == []


@pytest.mark.parametrize("extra", ['{"mytag": {"a": 1}}', '{"mytag": ["ok", [1]]}', '{"mytag": null}'])
def test_tags_that_render_to_no_tag_names_are_bad_input(env: ProjectEnv, extra: str) -> None:
    pb = write_yaml(env.project / "tg.yml", TAGGED_PLAY)
    res = play(env, "tg.yml", "-e", extra)
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:3:3: tag '{{{{ mytag }}}}': " in res.err and "(at tags)" in res.err, res.err
    assert "is not a tag name nor a list of them" in res.err, res.err
    assert touched(env) == []


@pytest.mark.parametrize(("select", "runs"), [
    ([], True), (["-t", "deploy"], True), (["-t", "other"], False), (["--skip-tags", "deploy"], False),
    (["-t", "untagged"], False), (["-t", "tagged"], True),
])
def test_templated_play_tags_select_the_same_tasks_in_the_run_and_the_listing(
        env: ProjectEnv, select: list[str], runs: bool) -> None:
    write_yaml(env.project / "tg.yml", TAGGED_PLAY)
    listed = play(env, "tg.yml", "-e", "mytag=deploy", "--list-tasks", *select)
    assert listed.rc == 0, listed.out + listed.err
    assert ("touch  [command]\tTAGS: [deploy]" in listed.out) is runs, listed.out
    assert "{{" not in listed.out
    res = play(env, "tg.yml", "-e", "mytag=deploy", *select)
    assert res.rc == 0, res.out + res.err
    assert touched(env) == (["h1", "h2"] if runs else [])
