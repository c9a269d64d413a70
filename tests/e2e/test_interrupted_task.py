"""A task in flight when the run is interrupted (Ctrl-C, SIGTERM) is recorded as such: its name,
its host and an `interrupted` result in the console, the JSON events and the history, after
every result reported before it (a command's reporting put off while the next request is in
flight included), and the recap counts it failed and names it."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.conftest import pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, opsrunner_process, read_events, task_ends


def _interrupt(tmp_path: Path, hosts: list[str], marker: str, sig: signal.Signals, strategy: str = "linear",
               ) -> tuple[int, str, list[dict], dict]:
    inv = write_inventory(tmp_path / "inv.yml", {h: {"connection": "local"} for h in hosts})
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  strategy: {strategy}
  tasks:
    - name: first
      command: echo one
    - name: second
      command: echo two
    - name: long on {{{{ inventory_hostname }}}}
      shell: sleep {marker}
""")
    events, history = tmp_path / "ev.jsonl", tmp_path / "history.db"
    with opsrunner_process("play", str(pb), "-i", str(inv), "--json-events", str(events), "--history",
                           str(history), "--no-color") as proc:
        assert wait_for(lambda: len(pids_with(marker)) == len(hosts), 30), "the commands never started"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    run = json.loads(cli("show", "last", "--json", "--history", str(history)).out)
    return proc.returncode, out, read_events(events), run


@pytest.mark.parametrize("sig,rc,by", [(signal.SIGINT, 99, "the user"), (signal.SIGTERM, 143, "SIGTERM")],
                         ids=["ctrl-c", "sigterm"])
def test_the_task_in_flight_on_one_host_is_recorded_interrupted_after_what_came_before(
        tmp_path: Path, cleanup_marker: str, sig: signal.Signals, rc: int, by: str) -> None:
    code, out, events, run = _interrupt(tmp_path, ["h"], cleanup_marker, sig)
    assert code == rc, out
    long = "long on h"  # the templated title, everywhere
    ends = task_ends(events)
    assert [(e["task"], e["status"]) for e in ends] == [("first", "changed"), ("second", "changed"),
                                                         (long, "interrupted")], ends
    assert ends[-1]["host"] == "h" and f"interrupted ({sig.name}) while it ran on h" in ends[-1]["msg"]
    assert [e["event"] for e in events].index("recap") == len(events) - 1
    recap = events[-1]
    assert recap["in_flight"] == [{"host": "h", "task": long}] and recap["hosts"]["h"]["failed"] == 1, recap
    # The console: each result under its banner, in order, then the recap naming it.
    assert out.index("TASK [second]") < out.index("changed: [h]", out.index("TASK [second]")) \
        < out.index(f"TASK [{long}]") < out.index("interrupted: [h]: INTERRUPTED! => interrupted"), out
    assert re.search(r"^h\s+: ok=2\s+changed=2\s+unreachable=0\s+failed=1\s", out, re.M), out
    assert f"interrupted: run stopped by {by} during '{long}' on h" in out, out
    # The history: the last task is the one cut short; the exit code says how the run ended.
    assert run["exit_code"] == rc and run["recap"]["h"]["failed"] == 1
    assert [(t["task"], t["host"], t["status"]) for t in run["tasks"]][-1] == (long, "h", "interrupted"), run
    shown = cli("show", "last", "--history", str(tmp_path / "history.db")).out
    assert f"interrupted: [h] {long}" in shown, shown


@pytest.mark.parametrize("strategy", ["linear", "free"])
def test_every_host_in_flight_is_recorded_interrupted(tmp_path: Path, cleanup_marker: str, strategy: str) -> None:
    code, out, events, run = _interrupt(tmp_path, ["a", "b"], cleanup_marker, signal.SIGTERM, strategy)
    assert code == 143, out
    ends = task_ends(events)
    cut = sorted((e["host"], e["task"]) for e in ends if e["status"] == "interrupted")
    assert [h for h, _ in cut] == ["a", "b"] and all(t.startswith("long on ") for _, t in cut), ends
    assert all(e["status"] == "changed" for e in ends if e["status"] != "interrupted") and len(ends) == 6, ends
    recap = events[-1]
    assert sorted(f["host"] for f in recap["in_flight"]) == ["a", "b"], recap
    assert all(recap["hosts"][h]["failed"] == 1 for h in "ab"), recap
    assert sorted((t["host"], t["status"]) for t in run["tasks"] if t["status"] == "interrupted") == \
        [("a", "interrupted"), ("b", "interrupted")], run
    assert "interrupted: run stopped by SIGTERM during " in out, out
