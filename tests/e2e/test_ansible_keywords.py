"""Play and task keywords as ansible-core 2.19 runs them (observed side by side on the same
playbooks); local connection, and ssh through the hostile wrappers where the target matters."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import host_vars_for, write_inventory
from tests.e2e.test_ansible_parity import play, recap, statuses
from tests.helpers import cli, task_ends


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    return write_inventory(tmp_path / "inv.yml", {f"h{i}": {"connection": "local"} for i in range(1, 3)})


def test_with_items_flattens_one_level_and_loop_control(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: wi
      debug: {msg: "{{ item }}"}
      with_items: [[1, 2], 3, [[4]]]
      register: wi
    - name: lc
      debug: {msg: "{{ fruit }} {{ i }} {{ ansible_loop.first }} {{ ansible_loop.revindex }}"}
      loop: [x, y]
      loop_control: {loop_var: fruit, index_var: i, label: "L{{ i }}", extended: true}
      register: lc
    - assert:
        that:
          - wi.results | map(attribute='item') | list == [1, 2, 3, [4]]
          - lc.results | map(attribute='msg') | list == ['x 0 True 2', 'y 1 False 1']
          - lc.results[1].fruit == 'y' and lc.results[1].i == 1
          - lc.results[1].ansible_loop_var == 'fruit'
""")
    assert rc == 0, out
    assert statuses(ev, "assert") == {"h1": "ok"}
    assert "(item=L0)" in out and "(item=L1)" in out


def test_run_once_environment_and_check_mode_per_task(tmp_path: Path, inv: Path) -> None:
    touched = tmp_path / "touched"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1,h2
  tasks:
    - name: once
      command: echo {{{{ inventory_hostname }}}}
      run_once: true
      check_mode: false
      register: once
    - name: show
      debug: {{msg: "{{{{ once.stdout }}}}"}}
    - name: env
      shell: echo $FOO
      environment: {{FOO: "{{{{ inventory_hostname }}}}-bar"}}
      check_mode: false
    - name: cm
      command: touch {touched}
      check_mode: true
    - name: real despite --check
      command: echo really
      check_mode: false
      register: real
""", "--check")
    assert rc == 0, out
    assert statuses(ev, "once") == {"h1": "changed"}
    assert {e["host"]: e["msg"] for e in task_ends(ev, "show")} == {"h1": "h1", "h2": "h1"}
    assert {e["host"]: e["stdout_tail"] for e in task_ends(ev, "env")} == {"h1": "h1-bar", "h2": "h2-bar"}
    assert statuses(ev, "cm") == {"h1": "skipped", "h2": "skipped"} and not touched.exists()
    assert {e["host"]: e["stdout_tail"] for e in task_ends(ev, "real despite --check")} == \
        {"h1": "really", "h2": "really"}
    # As ansible-core: the run_once task is counted on the host that ran it only.
    assert recap(ev, "h1")["changed"] == 3 and recap(ev, "h2")["changed"] == 2


def test_environment_reaches_commands(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  environment: {PLAYWIDE: p}
  tasks:
    - name: env
      shell: echo $FOO $PLAYWIDE
      environment: {FOO: "{{ inventory_hostname }}-bar"}
""")
    assert rc == 0, out
    assert [e["stdout_tail"] for e in task_ends(ev, "env")] == ["h1-bar p"]


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_environment_is_rendered_per_loop_item(tmp_path: Path, transport: str, request: pytest.FixtureRequest) -> None:
    """As ansible-core: a looped task's `environment` is rendered with each item (written as a
    mapping or as one template, and through loop_control's loop_var), after `when`; check leaves
    it to the run."""
    server = request.getfixturevalue("sshd") if transport != "local" else None
    inv = write_inventory(tmp_path / "inv.yml", {"t": host_vars_for(transport, server)})
    body = """
- hosts: t
  environment: {PLAYWIDE: p}
  tasks:
    - name: per item
      command: sh -c 'echo "X=$X $PLAYWIDE"'
      environment: {X: "{{ item }}-x"}
      loop: [a1, b2]
      register: per_item
    - name: whole item
      command: sh -c 'echo "Y=$Y"'
      environment: "{{ pair }}"
      loop: [{Y: c3}, {Y: d4}]
      loop_control: {loop_var: pair}
    - assert:
        that: per_item.results | map(attribute='stdout') | list == ['X=a1-x p', 'X=b2-x p']
    - name: not run
      command: "true"
      environment: {A: "{{ nope }}"}
      when: false
"""
    rc, out, ev = play(tmp_path, inv, body)
    assert rc == 0, out
    assert [e["stdout_tail"] for e in task_ends(ev, "per item")] == ["X=a1-x p\nX=b2-x p"], out
    assert [e["stdout_tail"] for e in task_ends(ev, "whole item")] == ["Y=c3\nY=d4"], out
    assert statuses(ev, "not run") == {"t": "skipped"}  # `when` first: its environment is never rendered
    checked = cli("check", str(tmp_path / "pb.yml"), "-i", str(inv), cwd=tmp_path)
    assert checked.rc == 0, checked.out + checked.err


def test_delegate_to_localhost_runs_on_the_controller(tmp_path: Path) -> None:
    # The host itself is unreachable: only the delegated task can succeed.
    inv = write_inventory(tmp_path / "inv.yml", {"far": {"connection": "ssh", "host": "127.0.0.1", "port": 9,
                                                        "connect_timeout": 2}})
    rc, out, ev = play(tmp_path, inv, """
- hosts: far
  tasks:
    - name: on controller
      command: echo "{{ inventory_hostname }}"
      delegate_to: localhost
      register: r
    - name: on target
      command: "true"
""")
    assert rc == 3, out
    assert [e["stdout_tail"] for e in task_ends(ev, "on controller")] == ["far"]
    assert statuses(ev, "on target") == {"far": "unreachable"}


@pytest.mark.parametrize("transport", ["local", "ssh+reaper+fd_holder"])
def test_become_su_runs_as_the_other_user(tmp_path: Path, transport: str, request: pytest.FixtureRequest) -> None:
    if os.geteuid() != 0:
        pytest.skip("su without a password needs root")
    server = request.getfixturevalue("sshd") if transport != "local" else None
    inv = write_inventory(tmp_path / "inv.yml", {"t": host_vars_for(transport, server)})
    rc, out, ev = play(tmp_path, inv, """
- hosts: t
  tasks:
    - name: who
      command: id -un
      become: true
      become_user: nobody
      become_method: su
    - name: quoted
      command: printf '%s|' "a b" "it's" '$(x)'
      become: true
      become_method: su
    - name: plain
      command: id -un
""")
    assert rc == 0, out
    assert [e["stdout_tail"] for e in task_ends(ev, "who")] == ["nobody"]
    assert [e["stdout_tail"] for e in task_ends(ev, "quoted")] == ["a b|it's|$(x)|"]
    assert [e["stdout_tail"] for e in task_ends(ev, "plain")] != ["nobody"]


def test_become_sudo_password_needed_is_a_clear_error(tmp_path: Path, inv: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in sudo that behaves as sudo -n does when the sudoers rule needs a password.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    sudo = bindir / "sudo"
    sudo.write_text('#!/bin/sh\n[ "$1" = -n ] || exit 99\necho "sudo: a password is required" >&2\nexit 1\n')
    sudo.chmod(sudo.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    rc, out, _ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: root
      command: "true"
      become: true
""")
    assert rc == 2
    assert "become: sudo on h1 needs a password to run as root" in out
    assert "sudo -n" in out


INCLUDES = {
    "first.yml": "- hosts: h1\n  tasks:\n    - {name: first play, debug: {msg: first}}\n",
    "more.yml": "- name: inner\n  debug: {msg: \"inner {{ inc_var }}\"}\n",
    "vars/common.yml": "common: c\n", "vars/h1.yml": "per_host: p-h1\n", "vars/default.yml": "per_host: default\n",
    "vars/extra.yml": "e: 5\n", "roles/r2/vars/main.yml": "r2_var: from r2\n",
    "roles/r2/tasks/other.yml": "- name: in r2\n  command: echo {{ rp }} {{ r2_var }}\n  notify: r2 handler\n",
    "roles/r2/handlers/main.yml": "- name: r2 handler\n  debug: {msg: r2 handler ran}\n",
    "pb.yml": """
- import_playbook: first.yml
- hosts: h1,h2
  vars: {which: special}
  vars_files:
    - vars/common.yml
    - ["vars/{{ inventory_hostname }}.yml", vars/default.yml]
  tasks:
    - name: show files
      debug: {msg: "{{ common }} {{ per_host }}"}
    - name: sf
      set_fact: {fact_a: "{{ inventory_hostname }}-a", fact_n: 3}
    - name: iv
      include_vars: {file: vars/extra.yml, name: extra}
    - name: show facts
      debug: {msg: "{{ fact_a }} {{ fact_n + 1 }} {{ extra.e }}"}
    - import_tasks: more.yml
      vars: {inc_var: imported}
      when: inventory_hostname == 'h1'
    - include_tasks: more.yml
      vars: {inc_var: included}
    - include_role: {name: r2, tasks_from: other}
      vars: {rp: param}
    - name: role var private
      debug: {msg: "{{ r2_var | default('private') }}"}
- hosts: h1
  tasks:
    - import_role: {name: r2, tasks_from: other}
      vars: {rp: p2}
    - name: role var public
      debug: {msg: "{{ r2_var }}"}
""",
}


def test_vars_files_set_fact_include_vars_and_includes(tmp_path: Path, inv: Path) -> None:
    for name, text in INCLUDES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    rc, out, ev = play(tmp_path, inv, INCLUDES["pb.yml"])
    assert rc == 0, out
    msgs = {(e["task"], e["host"]): e["msg"] for e in task_ends(ev) if e["module"] == "debug"}
    assert msgs[("first play", "h1")] == "first"
    assert msgs[("show files", "h1")] == "c p-h1" and msgs[("show files", "h2")] == "c default"
    assert msgs[("show facts", "h1")] == "h1-a 4 5" and msgs[("show facts", "h2")] == "h2-a 4 5"
    inner = [(e["host"], e["status"], e["msg"]) for e in task_ends(ev, "inner")]
    inner = sorted(inner[:2]) + sorted(inner[2:])  # per task, hosts finish in any order
    assert inner == [("h1", "ok", "inner imported"), ("h2", "skipped", "Conditional result was False"),
                     ("h1", "ok", "inner included"), ("h2", "ok", "inner included")]
    assert [e["stdout_tail"] for e in task_ends(ev, "in r2")] == ["param from r2", "param from r2", "p2 from r2"]
    assert msgs[("role var private", "h1")] == "private"
    assert msgs[("role var public", "h1")] == "from r2"
    assert sorted((e["task"], e["host"]) for e in ev if e["event"] == "handler_end") == \
        [("r2 handler", "h1"), ("r2 handler", "h1"), ("r2 handler", "h2")]
    # ansible-core 2.19: h1 ok=15 changed=2, h2 ok=10 changed=1 skipped=1, counting the include_tasks
    # and include_role lines themselves (2 per host), as opsrunner does.
    assert recap(ev, "h1") == {"ok": 15, "changed": 2, "unreachable": 0, "failed": 0, "skipped": 0,
                               "rescued": 0, "ignored": 0}
    assert recap(ev, "h2") == {"ok": 10, "changed": 1, "unreachable": 0, "failed": 0, "skipped": 1,
                               "rescued": 0, "ignored": 0}


@pytest.mark.parametrize(("body", "message"), [
    ("- hosts: h1\n  vars_files: [missing.yml]\n  tasks: []\n", "vars file not found: missing.yml"),
    ("- hosts: h1\n  vars_files: [[a.yml, b.yml]]\n  tasks: []\n", "vars file not found: a.yml or b.yml"),
    ("- hosts: h1\n  tasks:\n    - import_tasks: nope.yml\n", "import_tasks 'nope.yml' not found"),
    ("- hosts: h1\n  tasks:\n    - include_tasks: '{{ x }}.yml'\n",
     "include_tasks needs a file name without templates"),
    ("- hosts: h1\n  tasks:\n    - include_tasks: pb.yml\n      loop: [1]\n",
     "'loop' is not supported on include_tasks"),
    ("- import_playbook: pb.yml\n", "import_playbook 'pb.yml' includes itself"),
])
def test_bad_includes_exit_4_with_file_and_line(tmp_path: Path, inv: Path, body: str, message: str) -> None:
    rc, out, ev = play(tmp_path, inv, body)
    assert rc == 4, out
    assert message in out and "pb.yml:" in out
    assert ev == []


def test_gather_facts(tmp_path: Path, inv: Path) -> None:
    import getpass
    import platform
    import socket

    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  gather_facts: true
  tasks:
    - name: facts
      debug:
        msg: "{{ ansible_hostname }}|{{ ansible_user_id }}|{{ ansible_facts.system }}|{{
          ansible_python_version }}|{{ ansible_nvidia_gpus is sequence }}"
""")
    assert rc == 0, out
    assert [e["task"] for e in task_ends(ev)] == ["Gathering Facts", "facts"]
    expected = f"{socket.gethostname().split('.')[0]}|{getpass.getuser()}|Linux|" \
               f"{platform.python_version()}|True"
    assert [e["msg"] for e in task_ends(ev, "facts")] == [expected]


def test_task_titles_are_rendered_when_they_hold_any_jinja_and_kept_as_written_otherwise(
        tmp_path: Path, inv: Path) -> None:
    rc, out, _ev = play(tmp_path, inv, """
- hosts: h1
  vars: {step: deploy}
  tasks:
    - {name: "{{ step }} code", command: "true"}
    - {name: "clear {# the trainer's #}cache", command: "true"}
    - {name: "plain title, {braces} kept", command: "true"}
""")
    assert rc == 0, out
    assert "TASK [deploy code]" in out
    assert "TASK [clear cache]" in out  # a Jinja comment alone is still Jinja
    assert "TASK [plain title, {braces} kept]" in out
