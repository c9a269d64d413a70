"""ansible-playbook's --start-at-task, --step, -u, --private-key, -c and --syntax-check.

What ansible-playbook does was observed with ansible-core 2.19 (ansible-playbook 2.19.14)
on the playbook FLOW below: `--start-at-task three` runs three, alw, the handler h1 (notified
by three) and the second play's p2; a handler's or a rescue task's name, or an unknown one,
matches nothing ("[ERROR]: No matching task"; opsrunner refuses it up front, exit 4)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import write_inventory, write_yaml
from tests.helpers import ROOT, cli, read_events, started, task_ends
from tests.sshd import PrivateSSHD, accepted_logins, free_port

FLOW = """
- hosts: all
  tasks:
    - name: one
      command: touch {{ out }}/one
      notify: h1
    - block:
        - name: two
          command: touch {{ out }}/two
        - name: three
          command: touch {{ out }}/three
          notify: h1
      rescue:
        - name: resc
          command: touch {{ out }}/resc
      always:
        - name: alw
          command: touch {{ out }}/alw
  handlers:
    - name: h1
      command: touch {{ out }}/h1
- hosts: all
  gather_facts: true
  tasks:
    - name: p2
      command: touch {{ out }}/p2
"""


def play(tmp_path: Path, *args: str, body: str = FLOW, hosts: dict | None = None) -> tuple[int, str, list[dict]]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    inv = write_inventory(tmp_path / "inv.yml", hosts or {"localhost": {"connection": "local"}})
    pb = write_yaml(tmp_path / "pb.yml", body)
    events = tmp_path / "ev.jsonl"
    events.unlink(missing_ok=True)
    res = cli("play", str(pb), "-i", str(inv), "-e", f"out={out}", "--no-history", "--json-events", str(events),
              *args, cwd=tmp_path)
    return res.rc, res.out + res.err, read_events(events) if events.exists() else []


def ran(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "out").iterdir()}


def test_start_at_task_runs_from_it_as_ansible_does(tmp_path: Path) -> None:
    rc, out, ev = play(tmp_path, "--start-at-task", "three")
    assert rc == 0, out
    assert [e["task"] for e in task_ends(ev)] == ["three", "alw", "h1", "Gathering Facts", "p2"]
    assert ran(tmp_path) == {"three", "alw", "h1", "p2"}


def test_start_at_task_takes_a_glob_and_skips_earlier_plays_whole(tmp_path: Path) -> None:
    rc, _, ev = play(tmp_path, "--start-at-task", "t*")
    assert rc == 0
    assert [e["task"] for e in task_ends(ev)] == ["two", "three", "alw", "h1", "Gathering Facts", "p2"]
    rc, _, ev = play(tmp_path, "--start-at-task", "p2")
    assert rc == 0
    assert [e["task"] for e in task_ends(ev)] == ["Gathering Facts", "p2"]  # play 1: nothing, not even facts


@pytest.mark.parametrize("name", ["nope", "h1", "resc"])
def test_start_at_a_task_no_host_walks_to_is_refused_before_any_host(tmp_path: Path, name: str) -> None:
    rc, out, ev = play(tmp_path, "--start-at-task", name)
    assert rc == 4
    assert f"pb.yml: --start-at-task: no task named '{name}'" in out
    assert ev == [] and ran(tmp_path) == set()


def test_syntax_check_is_check(tmp_path: Path) -> None:
    rc, out, _ = play(tmp_path, "--syntax-check")
    assert rc == 0 and "pb.yml: OK (2 plays, 7 tasks" in out
    assert ran(tmp_path) == set()
    broken = "- hosts: all\n  tasks:\n    - name: x\n      nosuchmodule: {}\n"
    rc, out, _ = play(tmp_path, "--syntax-check", body=broken)
    assert rc == 4 and "pb.yml:4:" in out


def test_step_without_a_terminal_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    inv = write_inventory(tmp_path / "inv.yml", {"localhost": {"connection": "local"}})
    pb = write_yaml(tmp_path / "pb.yml", FLOW)
    proc = subprocess.run([sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(inv), "-e", f"out={out}",
                           "--no-history", "--step"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 4
    assert "--step asks before each task and needs a terminal" in proc.stderr
    assert ran(tmp_path) == set()


def _answer_prompts(master: int, answers: list[str], deadline: float) -> str:
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            continue
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal: it has exited
            break
        if not data:
            break
        seen += data
        if seen.endswith(b"(N)o/(y)es/(c)ontinue: "):
            os.write(master, (answers.pop(0) if answers else "n").encode() + b"\n")
    return seen.decode(errors="replace")


def test_step_asks_before_each_task_on_a_terminal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    inv = write_inventory(tmp_path / "inv.yml", {"localhost": {"connection": "local"}})
    pb = write_yaml(tmp_path / "pb.yml", FLOW)
    master, slave = os.openpty()
    argv = [sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(inv), "-e", f"out={out}",
            "--no-history", "--no-color", "--step"]
    try:
        with started(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT) as proc:
            os.close(slave)
            # one: no; two: yes; three: continue (three and everything after run without asking)
            screen = _answer_prompts(master, ["n", "y", "c"], time.monotonic() + 60)
            assert proc.wait(timeout=30) == 0, screen
    finally:
        os.close(master)
    assert screen.count("(N)o/(y)es/(c)ontinue: ") == 3
    assert "Perform task: TASK: one (N)o/(y)es/(c)ontinue: " in screen
    assert "Perform task: TASK: three (N)o/(y)es/(c)ontinue: " in screen
    assert ran(tmp_path) == {"two", "three", "alw", "h1", "p2"}


PROBE = """
- hosts: all
  tasks:
    - name: probe
      command: id -un
      register: who
    - name: say
      debug: {msg: "user={{ who.stdout }}"}
"""


def _ssh_host(sshd: PrivateSSHD, *drop: str, **extra: object) -> dict[str, object]:
    found = sshd.host_vars(**extra)
    for key in drop:
        found.pop(key)
    return found


def test_user_flag_is_the_default_and_host_vars_win(tmp_path: Path, sshd: PrivateSSHD) -> None:
    rc, out, ev = play(tmp_path, "-u", sshd.user, body=PROBE, hosts={"h": _ssh_host(sshd, "user")})
    assert rc == 0, out
    assert task_ends(ev, "probe")[0]["stdout_tail"] == sshd.user
    rc, out, ev = play(tmp_path, "-u", "no-such-user-here", body=PROBE, hosts={"h": _ssh_host(sshd, "user")})
    assert rc == 3 and task_ends(ev, "probe")[0]["status"] == "unreachable"
    rc, out, ev = play(tmp_path, "-u", "no-such-user-here", body=PROBE, hosts={"h": _ssh_host(sshd)})
    assert rc == 0, out  # the host's own user wins over -u


def test_private_key_flag_is_the_default_and_host_vars_win(tmp_path: Path, sshd: PrivateSSHD) -> None:
    no_key = {"h": _ssh_host(sshd, "key_file")}
    rc, _, ev = play(tmp_path, body=PROBE, hosts=no_key)
    assert rc == 3 and task_ends(ev, "probe")[0]["status"] == "unreachable"  # the key is needed
    rc, out, ev = play(tmp_path, "--private-key", str(sshd.key_file), body=PROBE, hosts=no_key)
    assert rc == 0, out
    assert task_ends(ev, "probe")[0]["stdout_tail"] == sshd.user
    not_a_key = tmp_path / "not_a_key"
    not_a_key.write_text("not a key\n")
    rc, out, _ = play(tmp_path, "--private-key", str(not_a_key), body=PROBE, hosts={"h": _ssh_host(sshd)})
    assert rc == 0, out  # the host's key_file wins over --private-key
    rc, out, ev = play(tmp_path, "--private-key", str(tmp_path / "missing"), body=PROBE, hosts=no_key)
    assert rc == 4 and "<--private-key>: private key file not found" in out and ev == []


def test_connection_flag_is_the_default_and_host_vars_win(tmp_path: Path, sshd: PrivateSSHD) -> None:
    nowhere = {"box": {"host": "127.0.0.1", "port": free_port()}}  # ssh by default: refused, unreachable
    rc, _, ev = play(tmp_path, body=PROBE, hosts=nowhere)
    assert rc == 3 and task_ends(ev, "probe")[0]["status"] == "unreachable"
    rc, out, ev = play(tmp_path, "-c", "local", body=PROBE, hosts=nowhere)
    assert rc == 0, out
    before = accepted_logins(sshd)
    rc, out, ev = play(tmp_path, "-c", "local", body=PROBE, hosts={"h": _ssh_host(sshd)})
    assert rc == 0, out  # connection: ssh of the host wins over -c local
    assert accepted_logins(sshd) > before
    rc, out, _ = play(tmp_path, "-c", "telnet", body=PROBE, hosts=nowhere)
    assert rc == 4 and "unknown connection type 'telnet'" in out
