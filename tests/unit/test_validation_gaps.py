"""Bad input that used to pass `check` or lose its position: each is refused under both `check`
and `play` with FILE:LINE:COL (and the key at fault where there is one), exit 4, and the play's
first task, which would create a marker file on localhost, never runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import cli

INVENTORY = "all:\n  hosts:\n    localhost: {connection: local}\n"
#: A play whose first task touches the host: the marker exists if anything ran.
PLAY = "- hosts: all\n  tasks:\n    - shell: touch {marker}\n"
COMMANDS = ("check", "play")


@dataclass
class Case:
    """Files to write (bytes where they must not be UTF-8), and the one error expected: the file
    it names, its line and column, and the message after them (with its `(at KEY)`)."""

    files: dict[str, str | bytes]
    where: str
    line: int
    col: int
    message: str
    args: tuple[str, ...] = ()
    inventory: str = "inv.yml"


def run_case(tmp_path: Path, command: str, case: Case) -> tuple[int, list[str], Path]:
    marker = tmp_path / "touched"
    files = {"inv.yml": INVENTORY, **case.files}
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content.replace(b"{marker}", str(marker).encode()))
        else:
            path.write_text(content.replace("{marker}", str(marker)), encoding="utf-8")
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    res = cli(command, str(tmp_path / "pb.yml"), "-i", str(tmp_path / case.inventory), *args, cwd=tmp_path)
    assert "Traceback" not in res.out + res.err
    return res.rc, [ln for ln in res.err.splitlines() if ln.startswith("ERROR:")], marker


def assert_refused(tmp_path: Path, command: str, case: Case) -> None:
    rc, errors, marker = run_case(tmp_path, command, case)
    where = tmp_path / case.where
    assert errors == [f"ERROR: {where}:{case.line}:{case.col}: {case.message}"], errors
    assert rc == 4
    assert not marker.exists()


UNACCEPTABLE = "YAML syntax error: unacceptable character #x{:04x}: special characters are not allowed"

ENCODING_CASES = {
    "NUL byte in a playbook": Case(
        {"pb.yml": PLAY + "    - debug: {msg: a\x00b}\n"}, "pb.yml", 4, 21, UNACCEPTABLE.format(0)),
    "control character in a quoted playbook string": Case(
        {"pb.yml": PLAY + '    - debug:\n        msg: "ab\x01"\n'}, "pb.yml", 5, 17, UNACCEPTABLE.format(1)),
    "control character after CRLF lines": Case(
        {"pb.yml": PLAY.replace("\n", "\r\n") + "    - debug: {msg: \x1b}\r\n"}, "pb.yml", 4, 20,
        UNACCEPTABLE.format(0x1B)),
    "control character in a YAML inventory": Case(
        {"inv.yml": "all:\n  hosts:\n    localhost: {connection: local, v: \"\x02\"}\n", "pb.yml": PLAY},
        "inv.yml", 3, 40, UNACCEPTABLE.format(2)),
    "NUL byte in an INI inventory": Case(
        {"inv.ini": "[web]\nlocalhost ansible_connection=local v=a\x00\n", "pb.yml": PLAY}, "inv.ini", 2, 39,
        "unacceptable character #x0000: control characters are not allowed", inventory="inv.ini"),
    "control character in a vars file": Case(
        {"vars.yml": "a: 1\nb: '\x07'\n", "pb.yml": "- hosts: all\n  vars_files: [vars.yml]\n  tasks:\n"
         "    - shell: touch {marker}\n"}, "vars.yml", 2, 5, UNACCEPTABLE.format(7)),
    "control character in -e @file": Case(
        {"extra.yml": "a: 1\n\nb: \x7f\n", "pb.yml": PLAY}, "extra.yml", 3, 4, UNACCEPTABLE.format(0x7F),
        args=("-e", "@{tmp}/extra.yml")),
    "playbook not UTF-8": Case(
        {"pb.yml": (PLAY + "    - debug: {msg: caf\u00e9 ").encode() + b"\xff}\n"}, "pb.yml", 4, 25,
        "file is not valid UTF-8 (byte 0xff)"),
    "YAML inventory not UTF-8": Case(
        {"inv.yml": b"all:\n  hosts:\n    localhost:\n      connection: local\n      v: \xe9t\xe9\n",
         "pb.yml": PLAY}, "inv.yml", 5, 10, "inventory is not valid UTF-8 (byte 0xe9)"),
    "INI inventory not UTF-8": Case(
        {"inv.ini": b"[web]\nlocalhost ansible_connection=local v=\xc3(\n", "pb.yml": PLAY}, "inv.ini", 2, 38,
        "inventory is not valid UTF-8 (byte 0xc3)", inventory="inv.ini"),
    "vars file not UTF-8": Case(
        {"vars.yml": b"a: 1\nb: \x80\n", "pb.yml": "- hosts: all\n  vars_files: [vars.yml]\n  tasks:\n"
         "    - shell: touch {marker}\n"}, "vars.yml", 2, 4, "file is not valid UTF-8 (byte 0x80)"),
    "-e @file not UTF-8": Case(
        {"extra.yml": b"\xfe", "pb.yml": PLAY}, "extra.yml", 1, 1, "file is not valid UTF-8 (byte 0xfe)",
        args=("-e", "@{tmp}/extra.yml")),
    "role defaults not UTF-8": Case(
        {"roles/r/tasks/main.yml": "- debug: {msg: hi}\n", "roles/r/defaults/main.yml": b"x: 1\ny: \xff\n",
         "pb.yml": "- hosts: all\n  roles: [r]\n  tasks:\n    - shell: touch {marker}\n"},
        "roles/r/defaults/main.yml", 2, 4, "file is not valid UTF-8 (byte 0xff)"),
    "explicit tag on a value not of its type": Case(
        {"pb.yml": "- hosts: all\n  vars:\n    n: !!int ten\n  tasks:\n    - shell: touch {marker}\n"},
        "pb.yml", 3, 8, "YAML syntax error: 'ten' is not a valid int"),
    "explicit bool tag in an inventory": Case(
        {"inv.yml": "all:\n  hosts:\n    localhost:\n      connection: local\n      on: !!bool maybe\n",
         "pb.yml": PLAY}, "inv.yml", 5, 11, "YAML syntax error: 'maybe' is not a valid bool"),
    "explicit timestamp tag in a vars file": Case(
        {"vars.yml": "when: !!timestamp 2024-13-40\n", "pb.yml": "- hosts: all\n  vars_files: [vars.yml]\n"
         "  tasks:\n    - shell: touch {marker}\n"}, "vars.yml", 1, 7,
        "YAML syntax error: '2024-13-40' is not a valid timestamp"),
    "empty explicit int in -e @file": Case(
        {"extra.yml": "a:\n  - !!int\n", "pb.yml": PLAY}, "extra.yml", 2, 5, "YAML syntax error: '' is not a valid int",
        args=("-e", "@{tmp}/extra.yml")),
    "invalid YAML in an inventory": Case(
        {"inv.yml": "all:\n  hosts:\n    localhost: {connection: local\n", "pb.yml": PLAY}, "inv.yml", 4, 1,
        "YAML syntax error: expected ',' or '}', but got '<stream end>'"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(ENCODING_CASES))
def test_bad_bytes_and_bad_yaml_are_located(tmp_path: Path, command: str, name: str) -> None:
    assert_refused(tmp_path, command, ENCODING_CASES[name])


SYNTAX = "template syntax error: "
END_OF_PRINT = SYNTAX + "unexpected end of template, expected 'end of print statement'."

TEMPLATE_CASES = {
    "assert that: a string": Case(
        {"pb.yml": PLAY + '    - assert: {that: "x == (1"}\n'}, "pb.yml", 4, 16,
        SYNTAX + "unexpected end of the expression, expected ')' (at [0].tasks[1].assert.that)"),
    "assert that: a list": Case(
        {"pb.yml": PLAY + '    - assert:\n        that:\n          - "1 == 1"\n          - "x =="\n'}, "pb.yml", 7, 13,
        SYNTAX + "unexpected end of the expression (at [0].tasks[1].assert.that[1])"),
    "assert that= in key=value form": Case(
        {"pb.yml": PLAY + "    - name: kv\n      assert: that=x[\n"}, "pb.yml", 5, 7,
        SYNTAX + "unexpected end of the expression, expected ']' (at [0].tasks[1].assert.that)"),
    "assert in a role": Case(
        {"roles/r/tasks/main.yml": "- debug: {msg: hi}\n- assert:\n    that: x not in\n",
         "pb.yml": "- hosts: all\n  tasks:\n    - shell: touch {marker}\n    - import_role: {name: r}\n"},
        "roles/r/tasks/main.yml", 3, 5, SYNTAX + "unexpected end of the expression (at tasks[1].assert.that)"),
    "debug var:": Case(
        {"pb.yml": PLAY + '    - debug: {var: "x[1"}\n'}, "pb.yml", 4, 15,
        SYNTAX + "unexpected end of the expression, expected ']' (at [0].tasks[1].debug.var)"),
    "debug var: in braces": Case(
        {"pb.yml": PLAY + "    - debug:\n        var: '{{ x | }}'\n"}, "pb.yml", 5, 9,
        SYNTAX + "expected token 'name', got 'end of print statement' (at [0].tasks[1].debug.var)"),
    "serial": Case(
        {"pb.yml": "- hosts: all\n  serial: '{{ batch'\n  tasks:\n    - shell: touch {marker}\n"}, "pb.yml", 2, 3,
        END_OF_PRINT + " (at [0].serial)"),
    "play environment": Case(
        {"pb.yml": "- hosts: all\n  environment:\n    PATH: '{{ p }'\n  tasks:\n    - shell: touch {marker}\n"},
        "pb.yml", 3, 5, SYNTAX + "unexpected '}' (at [0].environment.PATH)"),
    "templated vars_files entry": Case(
        {"pb.yml": "- hosts: all\n  vars_files: ['{{ env ]}.yml']\n  tasks:\n    - shell: touch {marker}\n"},
        "pb.yml", 2, 16, SYNTAX + "unexpected ']' (at [0].vars_files[0])"),
    "role parameters": Case(
        {"roles/r/tasks/main.yml": "- debug: {msg: hi}\n",
         "pb.yml": "- hosts: all\n  roles:\n    - role: r\n      vars: {port: '{{ p'}\n  tasks:\n"
         "    - shell: touch {marker}\n"}, "pb.yml", 4, 14, END_OF_PRINT + " (at [0].roles[0].vars.port)"),
}

HOSTS_CASES = {
    "hosts: template syntax": Case(
        {"pb.yml": "- name: p\n  hosts: '{{ group'\n  tasks:\n    - shell: touch {marker}\n"}, "pb.yml", 2, 3,
        END_OF_PRINT + " (at [0].hosts)"),
    "hosts: template syntax in an imported playbook": Case(
        {"inner.yml": "- name: inner\n  hosts: ['web', '{% if %}']\n  tasks: []\n",
         "pb.yml": PLAY + "- import_playbook: inner.yml\n"}, "inner.yml", 2, 18,
        SYNTAX + "Expected an expression, got 'end of statement block' (at [0].hosts[1])"),
    "hosts: undefined variable": Case(
        {"pb.yml": "- name: p\n  hosts: '{{ group }}'\n  tasks:\n    - shell: touch {marker}\n"}, "pb.yml", 2, 3,
        "hosts pattern '{{ group }}': undefined variable: 'group' is undefined (at hosts)"),
    "hosts: a bad regex": Case(
        {"pb.yml": PLAY + "- name: second\n  hosts: '~(('\n  tasks: []\n"}, "pb.yml", 5, 3,
        "hosts pattern '~((': invalid host pattern '~((': missing ), unterminated subpattern at position 1 (at hosts)"),
    "hosts: a bad regex from -e": Case(
        {"pb.yml": "- name: p\n  hosts: '{{ target }}'\n  tasks:\n    - shell: touch {marker}\n"}, "pb.yml", 2, 3,
        "hosts pattern '{{ target }}': invalid host pattern '~web[': unterminated character set at position 3 "
        "(at hosts)", args=("-e", "target=~web[")),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(TEMPLATE_CASES))
def test_template_syntax_errors_fail_before_the_run(tmp_path: Path, command: str, name: str) -> None:
    assert_refused(tmp_path, command, TEMPLATE_CASES[name])


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(HOSTS_CASES))
def test_hosts_pattern_errors_are_located_alike_under_check_and_play(tmp_path: Path, command: str,
                                                                      name: str) -> None:
    assert_refused(tmp_path, command, HOSTS_CASES[name])


def test_valid_bare_expressions_and_play_templates_still_pass(tmp_path: Path) -> None:
    marker = tmp_path / "touched"
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(f"""
- hosts: "{{{{ target }}}}"
  serial: "{{{{ batch }}}}"
  vars: {{greeting: hello, n: 1}}
  tasks:
    - shell: touch {marker}
    - assert:
        that: ["{{{{ n }}}} == 1", "{{{{ greeting == 'hello' }}}}", true]
    - assert: {{that: "greeting is string"}}
    - debug: {{var: greeting}}
    - debug: var=greeting.upper()
""")
    args = ("-i", str(tmp_path / "inv.yml"), "-e", "target=all batch=1")
    checked = cli("check", str(tmp_path / "pb.yml"), *args, cwd=tmp_path)
    assert checked.rc == 0, checked.err
    assert not marker.exists()
    ran = cli("play", str(tmp_path / "pb.yml"), *args, cwd=tmp_path)
    assert ran.rc == 0, ran.err
    assert marker.exists()
    assert "greeting.upper(): HELLO" in ran.out


def test_a_bad_limit_is_still_the_command_line_s_mistake(tmp_path: Path) -> None:
    """Play patterns are bad input (exit 4); --limit is evaluated first and stays a usage error."""
    rc, errors, marker = run_case(tmp_path, "play", Case({"pb.yml": PLAY}, "", 0, 0, "", args=("--limit", "~((")))
    assert rc == 5
    assert errors == ["ERROR: invalid host pattern '~((': missing ), unterminated subpattern at position 1"]
    assert not marker.exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("play_key", ["stratgy: free", "strategy: fastest"])
def test_a_play_level_mistake_does_not_hide_its_tasks_mistakes(tmp_path: Path, command: str, play_key: str) -> None:
    marker = tmp_path / "touched"
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(f"- hosts: all\n  {play_key}\n  tasks:\n    - shell: touch {marker}\n"
                                     "      regsiter: out\n    - shel: echo hi\n")
    res = cli(command, str(tmp_path / "pb.yml"), "-i", str(tmp_path / "inv.yml"), cwd=tmp_path)
    errors = [line for line in (res.out + res.err).splitlines() if line.startswith("ERROR: ")]
    assert res.rc == 4 and not marker.exists()
    assert len(errors) == 3, errors
    assert "pb.yml:2:3: " in errors[0] and "strategy" in errors[0], errors
    assert "pb.yml:5:7: unknown module or keyword 'regsiter' (did you mean 'register'?)" in errors[1]
    assert "pb.yml:6:7: unknown module or keyword 'shel' (did you mean 'shell'?)" in errors[2]
