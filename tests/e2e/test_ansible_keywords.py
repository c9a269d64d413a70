"""Play and task keywords as ansible-core 2.19 runs them (observed side by side on the same
playbooks); local connection, and ssh through the hostile wrappers where the target matters."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import host_vars_for, write_inventory
from tests.e2e.test_ansible_parity import play, recap, statuses
from tests.helpers import task_ends


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
