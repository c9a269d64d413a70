"""Reaching a target is bounded apart from the command's own deadline.

A container-exec wrapper that hangs before it runs the command (a stuck `pct exec`) makes the
host unreachable within connect_timeout, naming the wrapper, and leaves no process of the
attempt behind: a scheduled run stuck that way would hold its locks and block the next ones.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import kill_marked, pids_with, sleep_marker, wait_for, write_inventory
from tests.helpers import cli, read_events


def _hanging_wrapper(folder: Path, token: str) -> Path:
    script = folder / "stuck-exec.sh"
    script.write_text(f'#!/bin/sh\nsleep {token}\nexec "$@"\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("transport", ["local", "ssh"])
@pytest.mark.parametrize("task", [{"command": "true"}, {"stat": {"path": "/"}}], ids=["bare-command", "agent-op"])
def test_a_wrapper_that_hangs_before_the_command_makes_the_host_unreachable(
        transport: str, task: dict[str, Any], request: pytest.FixtureRequest, tmp_path: Path) -> None:
    token = sleep_marker()
    wrapper = _hanging_wrapper(tmp_path, token)
    base: dict[str, Any] = {"connection": "local"} if transport == "local" \
        else request.getfixturevalue("sshd").host_vars()
    inv = write_inventory(tmp_path / "inv.yml", {"stuck": {**base, "wrapper": [str(wrapper)], "connect_timeout": 2,
                                                           "python_interpreter": sys.executable}})
    pb = tmp_path / "pb.yml"
    # The task's own deadline is far away: only the connect timeout can end this in time.
    pb.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False,
                                   "tasks": [{"name": "probe", "timeout": 600, **task}]}]))
    events = tmp_path / "events.jsonl"
    try:
        started = time.monotonic()
        res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), cwd=tmp_path)
        took = time.monotonic() - started
        assert res.rc == 3, res.out + res.err
        (end,) = [e for e in read_events(events) if e["event"] == "task_end"]
        assert end["status"] == "unreachable", end
        assert f"did not start within 2s (connect_timeout) through the wrapper chain `{wrapper}`" in end["msg"]
        assert took < 60, took  # 2 s and the stop, not the task's 600 s
        # Nothing of the attempt is left: not the wrapper, not what it was running.
        assert wait_for(lambda: not pids_with(token), 15), pids_with(token)
    finally:
        kill_marked(token)
