"""Boolean task keywords (become, check_mode, diff, run_once, ignore_errors) take ansible-core's
booleans only, as no_log does (test_templated_flags.py).

ansible-core reads them with `boolean(value, strict=True)`: a value that is none of its words
(true/false, yes/no, on/off, 1/0, y/n, t/f in any case) fails. A value known before the run
(a literal, -e, play or inventory vars) that is none of them, or that names an undefined
variable, is bad input: exit 4 with file:line and the key, before any host is touched. One
known only on the host fails the task there, and nothing of it runs: a `check_mode` that is no
boolean must never be taken as false, which would change the host.

Every host is a local one in the test's tmp dir; a host that ran a touch leaves a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched
from tests.helpers import ProjectEnv

ACCEPTED = "true/false, yes/no, on/off or 1/0"
KEYS = ("become", "check_mode", "diff", "run_once", "ignore_errors")


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    return local_project(tmp_path)


def flagged(key: str, value: str) -> str:
    """A play whose second task (line 6) writes the keyword at line 7, column 7."""
    return f"""- hosts: all
  tasks:
    - name: first
      command: touch {{{{ out }}}}/first-{{{{ inventory_hostname }}}}
    - name: flagged
      command: touch {{{{ out }}}}/{{{{ inventory_hostname }}}}
      {key}: {value}
"""


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize(("value", "args", "why"), [
    ("maybe", (), "'maybe' is not a valid boolean"),
    ("'{{ word }}'", ("-e", "word=sometimes"), "'sometimes' is not a valid boolean"),
    ("'{{ nowhere }}'", (), "'nowhere' is undefined"),
], ids=["literal", "extra-var", "undefined"])
def test_a_boolean_keyword_known_before_the_run_that_is_no_boolean_is_bad_input(
        env: ProjectEnv, key: str, value: str, args: tuple[str, ...], why: str) -> None:
    pb = write_yaml(env.project / "kw.yml", flagged(key, value))
    res = play(env, "kw.yml", *args)
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:7:7: {key}" in res.err and f"(at {key})" in res.err, res.err
    assert why in res.err, res.err
    assert ACCEPTED in res.err or "undefined" in why, res.err
    assert touched(env) == [] and "PLAY [" not in res.out


@pytest.mark.parametrize(("pb_text", "where", "key"), [
    # the play's check_mode, from the play's vars: told where the play writes it
    ("- hosts: all\n  vars: {dry: perhaps}\n  check_mode: '{{ dry }}'\n  tasks:\n"
     "    - command: touch {{ out }}/{{ inventory_hostname }}\n", "3:3", "check_mode"),
    # a block's become, from the inventory's vars (every host has the same)
    ("- hosts: all\n  tasks:\n    - block:\n        - command: touch {{ out }}/{{ inventory_hostname }}\n"
     "      become: '{{ out }}'\n", "4:11", "become"),
])
def test_a_play_or_block_boolean_keyword_that_is_no_boolean_is_bad_input(env: ProjectEnv, pb_text: str,
                                                                         where: str, key: str) -> None:
    pb = write_yaml(env.project / "kw.yml", pb_text)
    for command in ("play", "check"):
        res = env.run(command, "kw.yml", "-i", "inv.yml")
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: {pb.name}:{where}: {key} " in res.err and "is not a valid boolean" in res.err, res.err
        assert ACCEPTED in res.err and f"(at {key})" in res.err, res.err
    assert touched(env) == []


@pytest.mark.parametrize("key", KEYS)
def test_a_boolean_keyword_known_only_on_the_host_that_is_no_boolean_fails_that_task(env: ProjectEnv,
                                                                                      key: str) -> None:
    write_yaml(env.project / "kw.yml", f"""
- hosts: all
  tasks:
    - name: word
      command: echo maybe
      register: r
    - name: flagged
      command: touch {{{{ out }}}}/{{{{ inventory_hostname }}}}
      {key}: "{{{{ r.stdout }}}}"
""")
    res = play(env, "kw.yml")
    assert res.rc == 2, res.out + res.err
    assert f"{key} '{{{{ r.stdout }}}}': 'maybe' is not a valid boolean" in res.out, res.out
    assert ACCEPTED in res.out and res.out.count("fatal: [") == 2, res.out
    assert touched(env) == []  # neither host ran it, nor was it taken as false


@pytest.mark.parametrize(("key", "word", "hosts"), [
    ("check_mode", "Y", []),  # check mode: nothing written (once read as false, and written)
    ("check_mode", "T", []),
    ("run_once", "t", ["h1"]),  # the first host only (once read as false: both)
    ("run_once", "Y", ["h1"]),
])
def test_every_boolean_word_in_any_case_is_read_as_ansible_core_reads_it(env: ProjectEnv, key: str,
                                                                         word: str, hosts: list[str]) -> None:
    write_yaml(env.project / "kw.yml", flagged(key, "'{{ word }}'"))
    res = play(env, "kw.yml", "-e", f"word={word}")
    assert res.rc == 0, res.out + res.err
    assert [h for h in touched(env) if not h.startswith("first-")] == hosts, res.out


@pytest.mark.parametrize("word", ["On", "Y", "t"])
def test_ignore_errors_takes_every_true_word(env: ProjectEnv, word: str) -> None:
    write_yaml(env.project / "kw.yml", """
- hosts: all
  tasks:
    - name: fails
      command: "false"
      ignore_errors: "{{ word }}"
    - name: after
      command: touch {{ out }}/{{ inventory_hostname }}
""")
    res = play(env, "kw.yml", "-e", f"word={word}")
    assert res.rc == 0, res.out + res.err
    assert "ignored=1" in res.out and touched(env) == ["h1", "h2"], res.out


def test_a_boolean_keyword_reading_the_loop_item_is_left_to_the_host(env: ProjectEnv) -> None:
    """The item is not known before the run: no bad input for it (a guard, as no_log's)."""
    write_yaml(env.project / "kw.yml", """
- hosts: all
  tasks:
    - name: looped
      command: touch {{ out }}/{{ inventory_hostname }}-{{ item.n }}
      loop: [{n: 1, ignore: "yes"}]
      ignore_errors: "{{ item.ignore }}"
""")
    res = play(env, "kw.yml")
    assert res.rc == 0, res.out + res.err
    assert touched(env) == ["h1-1", "h2-1"]
