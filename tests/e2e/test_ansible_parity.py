"""Ansible behaviours, end to end through the CLI over the local connection. Each expectation
was observed with ansible-core 2.19 on the same playbook (`-i localhost, -c local`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    hosts = {f"h{i}": {"connection": "local", "idx": i} for i in range(1, 5)}
    return write_inventory(tmp_path / "inv.yml", hosts)


def play(tmp_path: Path, inv: Path, body: str, *extra: str) -> tuple[int, str, list[dict]]:
    pb = write_yaml(tmp_path / "pb.yml", body)
    events = tmp_path / "events.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *extra, cwd=tmp_path)
    return res.rc, res.out + res.err, read_events(events) if events.exists() else []


def statuses(ev: list[dict], task: str) -> dict[str, str]:
    return {e["host"]: e["status"] for e in task_ends(ev, task)}


def recap(ev: list[dict], host: str) -> dict[str, int]:
    assert ev[-1]["event"] == "recap"
    return dict(ev[-1]["hosts"][host])


def test_when_on_a_non_boolean_string_fails_the_task(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  vars: {sv: "yes"}
  tasks:
    - {name: strvar, debug: {msg: hi}, when: sv, ignore_errors: true}
    - {name: cast, debug: {msg: hi}, when: sv | bool}
    - {name: strvar2, debug: {msg: hi}, when: sv}
    - {name: after, debug: {msg: hi}}
""")
    assert rc == 2
    assert statuses(ev, "strvar") == {"h1": "failed"}
    assert statuses(ev, "cast") == {"h1": "ok"}
    assert task_ends(ev, "after") == []
    assert "Conditional result (True) was derived from value of type 'str'" in out
    assert recap(ev, "h1") == {"ok": 2, "changed": 0, "unreachable": 0, "failed": 1, "skipped": 0,
                               "rescued": 0, "ignored": 1}
