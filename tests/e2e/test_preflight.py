"""Preflight end to end: nothing is touched until the run can succeed; typed -e values."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.conftest import FD_HOLDER, REAPER, ROOT, pids_with, wait_for, write_yaml
from tests.helpers import cli, cli_subprocess, read_events, task_ends
from tests.sshd import PrivateSSHD, accepted_logins

ROLE_TASKS = ROOT / "roles" / "training_restart" / "tasks" / "main.yml"



def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_bad_e_value_leaves_the_old_job_alone_and_typed_e_values_restart(home: Path) -> None:
    env = {"HOME": str(home)}
    trainer = f"{home}/opsrunner-demo/code/train.py"
    first = cli_subprocess("play", "restart_training.yml", "-e", "verify_stable_for=1", env=env)
    assert first.rc == 0, first.out + first.err
    assert wait_for(lambda: len(pids_with(trainer)) == 1, 5)
    old = pids_with(trainer)
    log = home / "opsrunner-demo" / "train.log"

    bad = cli_subprocess("play", "restart_training.yml", "-e", "verify_within=thirty", env=env)
    assert bad.rc == 4, bad.out + bad.err
    line = _line_of(ROLE_TASKS, "within: ")
    assert f"{ROLE_TASKS}:{line}:" in bad.err
    assert "verify argument 'within': 'thirty' is not a number (from {{ verify_within }})" in bad.err
    assert "nothing was run" in bad.err
    assert bad.out == ""  # no play started, no task ran
    time.sleep(1)
    assert pids_with(trainer) == old  # the old job was not touched
    assert len(re.findall(r"ready: training demo started", log.read_text())) == 1

    good = cli_subprocess("play", "restart_training.yml", "-e", "verify_within=30", "-e", "kill_grace=5",
                          "-e", "code_delete=true", env=env)
    assert good.rc == 0, good.out + good.err
    assert "killed 1:" in good.out
    assert wait_for(lambda: len(pids_with(trainer)) == 1, 5)
    assert pids_with(trainer) != old
    assert len(re.findall(r"ready: training demo started", log.read_text())) == 2


@pytest.mark.parametrize("knob,value,arg,wanted", [
    ("kill_grace", "soon", "kill_old argument 'grace'", "a number"),
    ("expected_processes", "1.5", "verify argument 'processes'", "an integer (it has a fractional part)"),
    ("code_delete", "maybe", "deploy_code argument 'delete'", "a boolean"),
    ("log_grows_within", "fast", "verify argument 'log_grows'", "a number"),
    ("wait_gpu_free", "[1]", "kill_old argument 'wait_gpu_free'", "a number"),
])
def test_each_role_knob_is_checked_before_anything_runs(home: Path, monkeypatch: pytest.MonkeyPatch, knob: str,
                                                        value: str, arg: str, wanted: str) -> None:
    monkeypatch.setenv("HOME", str(home))
    res = cli("play", "restart_training.yml", "-e", f"{knob}={value}", cwd=ROOT)
    assert res.rc == 4, res.out + res.err
    assert f"{arg}: " in res.err and f" is not {wanted}" in res.err, res.err
    assert f"{{{{ {knob}" in res.err  # names the template the value came from
    assert not (home / "opsrunner-demo").exists()  # deploy (the first task) never ran


def test_e_is_split_like_a_shell(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: localhost\n  tasks:\n    - debug: msg='[{{ k }}] [{{ n }}]'\n")
    res = cli("play", str(pb), "-e", 'k="a b" n=1', cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "[a b] [1]" in res.out
    vars_file = tmp_path / "v.json"
    vars_file.write_text('{"k": "from json", "n": 2}')
    res = cli("play", str(pb), "-e", f"@{vars_file}", cwd=tmp_path)
    assert "[from json] [2]" in res.out
    res = cli("play", str(pb), "-e", 'k="a b', cwd=tmp_path)
    assert res.rc == 4
    assert "ERROR: -e #1 (of 1): cannot split it into key=value words: an unbalanced quote" in res.err
    res = cli("play", str(pb), "-e", str(vars_file), cwd=tmp_path)
    assert res.rc == 4
    assert f"to read variables from {vars_file}, write -e @{vars_file}" in res.err


def _two_host_inventory(tmp_path: Path, sshd: PrivateSSHD, bad_vars: dict[str, object]) -> Path:
    rig = sshd.host_vars(wrapper=[REAPER, FD_HOLDER])
    return write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {
        "good": {**rig, "grace": 3},
        "bad": {**rig, **bad_vars},
    }}})


PLAYBOOK = """
- hosts: all
  tasks:
    - name: first change on the host
      shell: touch {marks}/{{{{ inventory_hostname }}}}
    - name: stop by pidfile
      kill_old:
        pidfile: {marks}/{{{{ inventory_hostname }}}}.pid
        grace: "{{{{ grace }}}}"
"""


@pytest.mark.ssh
def test_host_failing_preflight_is_never_touched_over_the_hostile_rig(tmp_path: Path, sshd: PrivateSSHD) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    inv = _two_host_inventory(tmp_path, sshd, {"grace": "thirty"})
    pb = write_yaml(tmp_path / "pb.yml", PLAYBOOK.format(marks=marks))
    before = accepted_logins(sshd)
    events = tmp_path / "events.jsonl"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events), "-vv", cwd=tmp_path)
    assert res.rc == 2, res.out + res.err
    preflight = task_ends(read_events(events), "preflight")
    assert [(e["host"], e["status"]) for e in preflight] == [("bad", "failed")]
    assert "kill_old argument 'grace': 'thirty' is not a number" in preflight[0]["msg"]
    assert (marks / "good").exists()
    assert not (marks / "bad").exists()  # its first task never ran
    assert "fatal: [bad]: FAILED! => preflight: 1 problem(s), nothing was run on this host:" in res.out
    # Told where the bad host sets it, then where the playbook uses it.
    line = _line_of(inv, "grace: thirty")
    assert (f"{inv}:{line}:7: kill_old argument 'grace': 'thirty' is not a number (from {{{{ grace }}}}); "
            f"used by kill_old.grace at {pb}:9:9 (at grace)") in res.out, res.out
    assert re.search(r"bad\s+: ok=0\s+changed=0\s+unreachable=0\s+failed=1", res.out)
    assert re.search(r"good\s+: ok=2\s+changed=1\s+unreachable=0\s+failed=0", res.out)
    # One connection for the good host, none for the bad one.
    assert accepted_logins(sshd) - before == 1


@pytest.mark.ssh
def test_every_host_failing_the_same_way_is_exit_4_and_no_login(tmp_path: Path, sshd: PrivateSSHD) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    inv = _two_host_inventory(tmp_path, sshd, {})
    pb = write_yaml(tmp_path / "pb.yml", PLAYBOOK.format(marks=marks))
    before = accepted_logins(sshd)
    res = cli_subprocess("play", str(pb), "-i", str(inv), "-e", "grace=later", cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert res.err.count("is not a number") == 1  # the same problem, said once
    assert list(marks.iterdir()) == []
    time.sleep(0.5)
    assert accepted_logins(sshd) == before


def test_check_reports_problems_per_host(tmp_path: Path) -> None:
    inv = write_yaml(tmp_path / "inv.yml", """
all:
  vars:
    connection: local
  hosts:
    h1: {}
    h2: {grace: thirty}
    h3: {broken: "{{ oops"}
""")
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: all
  tasks:
    - kill_old:
        pidfile: /nonexistent/x.pid
        grace: "{{ grace | default(5) }}"
    - verify: {}
    - debug:
        msg: "{{ undefined_thing }}"
      when: inventory_hostname == 'h1'
""")
    res = cli("check", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 4
    lines = res.err.splitlines()
    assert lines == [
        f"ERROR: {pb}:7:15: on hosts h1, h2: verify needs at least one check: processes, min_processes, "
        "pidfile (its job running), log, port or gpu_min_memory_mb (at verify)",
        f"ERROR: {pb}:9:9: on host h1: undefined variable: 'undefined_thing' is undefined "
        "(from {{ undefined_thing }}) (at debug.msg)",
        f"ERROR: {pb}:6:9: on host h2: kill_old argument 'grace': 'thirty' is not a number "
        "(from {{ grace | default(5) }}) (at kill_old.grace)",
        f"ERROR: {inv}:8:5: on host h3: template syntax error: unexpected end of template, expected "
        "'end of print statement'. in variable 'broken' of host h3 (at broken)",
        "4 error(s); nothing was run.",
    ]


def test_check_passes_and_counts_hosts(tmp_path: Path) -> None:
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"vars": {"connection": "local"}, "hosts": {"a": {}, "b": {}}}})
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: all\n  tasks:\n    - kill_old: {pidfile: /x.pid, grace: '5'}\n")
    res = cli("check", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "preflight passed on 2)" in res.out


def test_registered_and_loop_values_are_checked_at_run_time(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: localhost
  tasks:
    - shell: echo 7
      register: out
    - pause:
        seconds: "{{ out.stdout }}"
      when: false
    - debug:
        msg: "{{ item }}"
      loop: "{{ out.stdout_lines }}"
    - pause:
        seconds: "{{ item }}"
      loop: ["0", "x"]
""")
    res = cli("play", str(pb), cwd=tmp_path)
    # The last task's second item is bad and known before the run: preflight fails the host.
    assert res.rc == 4, res.out + res.err
    assert "pause argument 'seconds': 'x' is not a number (from {{ item }})" in res.err
    ok = write_yaml(tmp_path / "ok.yml", """
- hosts: localhost
  tasks:
    - shell: echo 0.1
      register: out
    - pause:
        seconds: "{{ out.stdout }}"
""")
    res = cli("play", str(ok), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    late = write_yaml(tmp_path / "late.yml", """
- hosts: localhost
  tasks:
    - shell: echo soon
      register: out
    - pause:
        seconds: "{{ out.stdout }}"
""")
    res = cli("play", str(late), cwd=tmp_path)
    assert res.rc == 2
    assert "pause argument 'seconds': 'soon' is not a number (from {{ out.stdout }})" in res.out

