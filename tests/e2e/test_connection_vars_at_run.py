"""Connection vars that change during a run take effect on the next task: a host's connection
spec is built once and kept (taskrun.py), and must be built again when set_fact changes what it
reads - the host's own vars, or another host's read through hostvars."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import write_inventory, write_yaml
from tests.helpers import cli_subprocess, read_events, task_ends
from tests.sshd import PrivateSSHD


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def play(tmp_path: Path, inv: Path, tasks: list[dict]) -> tuple[int, list[dict]]:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": tasks}])
    events = tmp_path / "events.jsonl"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events), timeout=120)
    return res.rc, read_events(events)


def test_set_fact_of_the_port_moves_the_next_task(tmp_path: Path, sshd: PrivateSSHD) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"box": {**sshd.host_vars(), "connect_timeout": 3}})
    rc, events = play(tmp_path, inv, [
        {"name": "before", "command": "true"},
        {"name": "move", "set_fact": {"port": closed_port()}},
        {"name": "after", "command": "true"},
    ])
    assert rc != 0
    assert [(e["task"], e["status"]) for e in task_ends(events)] == [
        ("before", "changed"), ("move", "ok"), ("after", "unreachable")]


def test_another_host_s_set_fact_read_through_hostvars_moves_the_next_task(tmp_path: Path,
                                                                          sshd: PrivateSSHD) -> None:
    port = closed_port()
    reader = {**sshd.host_vars(), "connect_timeout": 3,
              "port": "{{ hostvars['source'].moved | default(" + str(sshd.port) + ") }}"}
    inv = write_inventory(tmp_path / "inv.yml", {"source": {"connection": "local"}, "reader": reader})
    rc, events = play(tmp_path, inv, [
        {"name": "before", "command": "true"},
        {"name": "move", "set_fact": {"moved": port}, "when": "inventory_hostname == 'source'"},
        {"name": "after", "command": "true"},
    ])
    assert rc != 0
    seen = {(e["task"], e["host"]): e["status"] for e in task_ends(events)}
    assert seen[("before", "reader")] == "changed"
    assert seen[("after", "source")] == "changed"
    assert seen[("after", "reader")] == "unreachable"
