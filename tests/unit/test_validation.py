"""Every class of bad input: a FILE:LINE:COL message naming the key, exit code 4, no host touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli

SENTINEL_TASK = """
    - name: would touch the host
      shell: touch {sentinel}
"""
SENTINEL_PLAY = "\n- hosts: localhost\n  tasks:" + SENTINEL_TASK


def run_check(tmp_path: Path, playbook: str, inventory: str | None = None) -> tuple[int, list[str], Path]:
    sentinel = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", playbook.replace("{sentinel}", str(sentinel)))
    args = ["play", str(pb)]
    if inventory is not None:
        args += ["-i", str(write_yaml(tmp_path / "inv.yml", inventory))]
    res = cli(*args, cwd=tmp_path)
    lines = [ln for ln in res.err.splitlines() if ln.startswith("ERROR:")]
    return res.rc, lines, sentinel


CASES = [
    ("unknown module with suggestion", """
- hosts: all
  tasks:
    - name: typo
      shel: echo hi
""", "pb.yml:5:7: unknown module or keyword 'shel' (did you mean 'shell'?) (at [0].tasks[0].shel)"),
    ("unknown play key", """
- hosts: all
  taks: []
""", "pb.yml:3:3: unknown key 'taks' (did you mean 'tasks'?) (at [0].taks)"),
    ("missing hosts", """
- name: nohosts
  tasks: []
""", "pb.yml:2:3: 'hosts' is required (at [0])"),
    ("wrong type", """
- hosts: all
  serial: {a: 1}
""", "pb.yml:3:3: {'a': 1} is not valid here: expected integer >= 1 or string matching ^([1-9][0-9]?|100)%$ or a {{ template }} or array (at [0].serial)"),
    ("module argument typo", """
- hosts: all
  tasks:
    - kill_old:
        pidfile: /x.pid
        grce: 3
""", "pb.yml:6:9: unknown key 'grce' (did you mean 'grace'?) (at [0].tasks[0].kill_old.grce)"),
    ("module argument type", """
- hosts: all
  tasks:
    - kill_old:
        pidfile: /x.pid
        grace: soon
""", "pb.yml:6:9: kill_old argument 'grace': 'soon' is not a number (at [0].tasks[0].kill_old.grace)"),
    ("missing module argument", """
- hosts: all
  tasks:
    - deploy_code:
        src: pb.yml
""", "pb.yml:5:9: 'dest' is required (at [0].tasks[0].deploy_code)"),
    ("two modules", """
- hosts: all
  tasks:
    - shell: a
      command: b
""", "pb.yml:4:7: task has more than one module: shell, command (at [0].tasks[0])"),
    ("no module", """
- hosts: all
  tasks:
    - name: nothing
      when: true
""", "pb.yml:4:7: task has no module (e.g. shell:, command:, deploy_code:) (at [0].tasks[0])"),
    ("role not found", """
- hosts: all
  roles: [nosuchrole]
""", "pb.yml:3:11: role 'nosuchrole' not found"),
    ("vars file not found", """
- hosts: all
  vars_files: [missing.yml]
""", "pb.yml:3:16: vars file not found: missing.yml (at [0].vars_files[0])"),
    ("template syntax", """
- hosts: all
  tasks:
    - shell: echo {{ unclosed
""", "pb.yml:4:7: template syntax error: unexpected end of template"),
    ("when syntax", """
- hosts: all
  tasks:
    - debug: msg=x
      when: a ==
""", "pb.yml:5:7: template syntax error: unexpected end of the expression (at [0].tasks[0].when)"),
    ("unknown handler", """
- hosts: all
  tasks:
    - shell: echo
      notify: restat
  handlers:
    - name: restart
      shell: echo
""", "pb.yml:5:7: notify names unknown handler 'restat' (did you mean 'restart'?) (at notify)"),
    ("duplicate key", """
- hosts: all
  tasks:
    - shell: echo a
      shell: echo b
""", "pb.yml:5:7: duplicate key 'shell' (first defined at line 4) (at shell)"),
    ("yaml syntax", """
- hosts: all
  tasks: [
""", "pb.yml:4:1: YAML syntax error"),
    ("module on a block", """
- hosts: all
  tasks:
    - block:
        - debug: msg=x
      shell: echo
""", "pb.yml:6:7: 'shell' is not allowed on a block"),
    ("rescue without block", """
- hosts: all
  tasks:
    - rescue:
        - debug: msg=x
""", "pb.yml:4:7: rescue/always need a block (at [0].tasks[0])"),
    ("error inside a block", """
- hosts: all
  tasks:
    - block:
        - shel: echo
""", "pb.yml:5:11: unknown module or keyword 'shel' (did you mean 'shell'?) (at [0].tasks[0].block[0].shel)"),
    ("missing src file", """
- hosts: all
  tasks:
    - deploy_code: {src: nofile, dest: /tmp/x}
""", "pb.yml:4:21: deploy_code src 'nofile' not found"),
]


@pytest.mark.parametrize("name,playbook,expected", CASES, ids=[c[0] for c in CASES])
def test_playbook_error(tmp_path: Path, name: str, playbook: str, expected: str) -> None:
    rc, lines, sentinel = run_check(tmp_path, playbook if name == "yaml syntax" else playbook + SENTINEL_PLAY)
    assert rc == 4
    assert any(expected in line for line in lines), lines
    assert all(str(tmp_path) in line or "<-e>" in line for line in lines)
    assert not sentinel.exists()


def test_all_errors_reported_at_once(tmp_path: Path) -> None:
    rc, lines, _ = run_check(tmp_path, """
- hosts: all
  tasks:
    - shel: a
    - kill_old: {pidfile: /x, grce: 1}
    - debug: {msg: "{{ x"}
""")
    assert rc == 4
    assert len(lines) == 3, lines
    assert [ln.split(":")[2] for ln in lines] == ["4", "5", "6"]



def test_a_task_s_shape_problem_hides_no_other_problem(tmp_path: Path) -> None:
    """A task whose keyword has the wrong shape (`tags: 5`) is not built, the rest of its play
    is: the other tasks' problems come in the same run, a block's inner tasks' too."""
    rc, lines, sentinel = run_check(tmp_path, """
- hosts: all
  tasks:
    - {name: a, command: "true", tags: 5}
    - {name: b, command: "true", failed_when: "}}"}
    - shll: echo
    - block:
        - {name: c, command: "true", tags: 6}
        - shll2: x
    - {name: d, command: "true", notify: nothere}
""" + SENTINEL_PLAY)
    assert rc == 4 and not sentinel.exists()
    assert [ln.split(":")[2] for ln in lines] == ["4", "8", "5", "6", "9", "10"], lines
    assert "(at [0].tasks[0].tags)" in lines[0] and "(at [0].tasks[3].block[0].tags)" in lines[1]
    assert "unknown module or keyword 'shll2'" in lines[4] and "unknown handler 'nothere'" in lines[5]


def test_a_keyword_that_fails_at_run_time_names_its_line_once(tmp_path: Path) -> None:
    """A value known only at run time (a registered result) that the run refuses fails that
    host with the keyword's own position, said once."""
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: localhost
  tasks:
    - command: echo otherhost
      register: r
    - command: "true"
      delegate_to: "{{ r.stdout }}"
""")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 2, res.out + res.err
    assert f"{pb}:7:7: delegate_to supports only localhost, not 'otherhost' (at delegate_to)" in res.out
    assert res.out.count("pb.yml:") == 1, res.out

INVENTORY_CASES = [
    ("unknown group key", "all:\n  hostz: {}\n", "inv.yml:2:3: unknown key 'hostz' (did you mean 'hosts'?) (at all.hostz)"),
    ("bad port", "all:\n  hosts:\n    h1: {port: 99999}\n", "inv.yml:3:10: 99999 is not valid here: expected integer >= 1 <= 65535 or a {{ template }} (at all.hosts.h1.port)"),
    ("bad connection", "all:\n  hosts:\n    h1: {connection: telnet}\n", "(at all.hosts.h1.connection)"),
    ("duplicate host", "all:\n  hosts:\n    h1: {}\n    h1: {}\n", "inv.yml:4:5: duplicate key 'h1' (first defined at line 3)"),
    ("bad wrapper", "all:\n  hosts:\n    h1: {wrapper: [{shel: x}]}\n", "(at all.hosts.h1.wrapper)"),
]


@pytest.mark.parametrize("name,inventory,expected", INVENTORY_CASES, ids=[c[0] for c in INVENTORY_CASES])
def test_inventory_error(tmp_path: Path, name: str, inventory: str, expected: str) -> None:
    playbook = "- hosts: all\n  tasks:\n" + SENTINEL_TASK
    rc, lines, sentinel = run_check(tmp_path, playbook, inventory)
    assert rc == 4
    assert any(expected in line for line in lines), lines
    assert not sentinel.exists()


def test_bad_extra_vars(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: localhost\n  tasks:\n    - debug: msg=x\n")
    res = cli("play", str(pb), "-e", "novalue", cwd=tmp_path)
    assert res.rc == 4
    assert "-e #1 (of 1): expected key=value, got 'novalue'" in res.err
    res = cli("play", str(pb), "-e", "ok=1 1bad=2", cwd=tmp_path)
    assert res.rc == 4
    assert "-e #1 (of 1): '1bad' is not a variable name (letters, digits and _, not starting with a digit; " \
           "word 2 of 2) (at 1bad)" in res.err, res.err
    bad = write_yaml(tmp_path / "vars.yml", "a: 1\na: 2\n")
    res = cli("play", str(pb), "-e", f"@{bad}", cwd=tmp_path)
    assert res.rc == 4
    assert f"{bad}:2:1: duplicate key 'a'" in res.err


def test_undefined_variable_names_variable_task_and_position(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: localhost
  tasks:
    - name: uses an undefined var
      debug:
        msg: "{{ not_defined_anywhere }}"
""")
    res = cli("play", str(pb), cwd=tmp_path)
    # Found by preflight, the same on every host: a mistake in the files, nothing is run.
    assert res.rc == 4
    assert "pb.yml:6:9: undefined variable: 'not_defined_anywhere' is undefined" in res.err
    assert "(at debug.msg)" in res.err
    assert "nothing was run" in res.err


def test_check_command_validates_only(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: localhost\n  tasks:\n" + SENTINEL_TASK.replace(
        "{sentinel}", str(tmp_path / "touched")))
    res = cli("check", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "OK (1 plays, 1 tasks" in res.out
    assert not (tmp_path / "touched").exists()
