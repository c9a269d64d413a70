"""Deadlines (issue 13 item 6): shell/command default to `default_timeout` (3600 s unless
set), the play's `timeout` and the task's override it; agent operations have documented
per-module defaults. Over ssh through both hostile wrappers."""

from __future__ import annotations

import re
from pathlib import Path

from opsrunner.deadlines import AGENT_DEADLINES_S, DEFAULT_TIMEOUT_S, module_default, seconds
from tests.conftest import FD_HOLDER, REAPER, ROOT, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends
from tests.sshd import PrivateSSHD


def test_module_defaults() -> None:
    assert module_default("shell", {}, {}) == DEFAULT_TIMEOUT_S == 3600
    assert module_default("command", {}, {"default_timeout": "{{ x }}"}) == "{{ x }}"
    assert module_default("kill_old", {}, {}) == 300
    assert module_default("kill_old", {"grace": 600}, {}) == 660  # grace always fits
    assert module_default("debug", {}, {}) is None  # controller-only modules need none
    for bad in ("abc", 0, -1, "inf", None):
        try:
            seconds(bad)
            raise AssertionError(f"{bad!r} accepted")
        except ValueError as exc:
            assert "timeout must be a" in str(exc)


def test_safety_page_lists_every_default_deadline() -> None:
    page = (ROOT / "docs" / "safety.md").read_text()
    safety = page[page.index("## What is bounded"):]
    for module, value in AGENT_DEADLINES_S.items():
        assert re.search(rf"`{module}`\s*\|\s*{value:g} s", safety), module
    assert f"{DEFAULT_TIMEOUT_S:g} s" in safety


def test_default_timeout_play_and_task_overrides(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])})
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  vars: {{default_timeout: 1.5}}
  tasks:
    - name: default_timeout from play vars
      shell: sleep {cleanup_marker}
      ignore_errors: true
    - name: task timeout wins
      shell: sleep 2.2
      timeout: 30
- hosts: all
  timeout: 1
  tasks:
    - name: play timeout
      command: sleep {cleanup_marker}
      ignore_errors: true
""")
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events))
    assert res.rc == 0, res.out
    ends = {e["task"]: e for e in task_ends(read_events(events))}
    first = ends["default_timeout from play vars"]
    assert first["status"] == "timed_out" and 1.5 <= first["duration_s"] < 30, first
    assert ends["task timeout wins"]["status"] == "changed"
    play = ends["play timeout"]
    assert play["status"] == "timed_out" and 1 <= play["duration_s"] < 30, play
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_default_timeout_from_extra_vars(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])})
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  tasks:
    - name: slow
      shell: sleep {cleanup_marker}
""")
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "-e", "default_timeout=1", "--json-events", str(events))
    assert res.rc == 2
    end = task_ends(read_events(events))[0]
    assert end["status"] == "timed_out" and end["duration_s"] < 30  # generous: under load; the default would be 3600
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)
