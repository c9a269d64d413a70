"""strategy: free, end to end through the CLI over local hosts: each host runs its tasks as fast
as it can, serial batches still come one after another, handlers and meta act per host, and the
console shows each result under its own task's banner.

Orderings are proven with files the hosts wait for, not with timings: under linear, the slow
host's wait for a file that a later task of the fast host writes can only time out."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    return write_inventory(tmp_path / "inv.yml", {f"h{i}": {"connection": "local"} for i in range(1, 5)})


def play(tmp_path: Path, inv: Path, body: str, *extra: str) -> tuple[int, str, list[dict[str, Any]]]:
    pb = write_yaml(tmp_path / "pb.yml", body)
    events = tmp_path / "events.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--no-history", "--json-events", str(events), *extra, cwd=tmp_path)
    return res.rc, res.out + res.err, read_events(events) if events.exists() else []


def wait_for(path: Path, seconds: int = 30) -> str:
    """A shell loop that succeeds once `path` exists and fails after `seconds`."""
    return f"for i in $(seq {seconds * 10}); do [ -e {path} ] && exit 0; sleep 0.1; done; exit 1"


def position(events: list[dict[str, Any]], task: str, host: str) -> int:
    return next(i for i, e in enumerate(events) if e["event"] == "task_end" and e["task"] == task
                and e["host"] == host)


def test_a_fast_host_finishes_while_a_slow_one_is_on_its_first_task(tmp_path: Path, inv: Path) -> None:
    # h2's first task ends 2 s after h1's last one wrote its file: long after h1's result is in
    # (without them, the two results came in either order when the machine was busy).
    flag = tmp_path / "h1-done"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1:h2
  strategy: free
  tasks:
    - name: first
      shell: "{{{{ '({wait_for(flag)}) && sleep 2' if inventory_hostname == 'h2' else 'true' }}}}"
    - name: second
      debug: {{msg: "{{{{ inventory_hostname }}}}"}}
    - name: last
      shell: "touch {flag}"
      when: inventory_hostname == 'h1'
""")
    assert rc == 0, out
    assert position(ev, "last", "h1") < position(ev, "first", "h2")
    assert {e["host"]: e["status"] for e in task_ends(ev, "first")} == {"h1": "changed", "h2": "changed"}
    assert ev[-1]["hosts"]["h2"]["skipped"] == 1 and ev[-1]["hosts"]["h1"]["changed"] == 2


def test_the_same_play_under_linear_waits_for_every_host(tmp_path: Path, inv: Path) -> None:
    # The control: without strategy free the fast host's last task waits for the slow host's
    # first, so the slow host's wait (cut to 2 s here) fails.
    flag = tmp_path / "h1-done"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1:h2
  tasks:
    - name: first
      shell: "{{{{ '{wait_for(flag, 2)}' if inventory_hostname == 'h2' else 'true' }}}}"
    - name: last
      shell: "touch {flag}"
      when: inventory_hostname == 'h1'
""")
    assert rc == 2, out
    assert {e["host"]: e["status"] for e in task_ends(ev, "first")} == {"h1": "changed", "h2": "failed"}


def test_serial_batches_come_one_after_another_under_free(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  strategy: free
  serial: 2
  tasks:
    - {name: one, debug: {msg: a}}
    - {name: two, debug: {msg: b}}
""")
    assert rc == 0, out
    hosts_in_order = [e["host"] for e in ev if e["event"] == "task_end"]
    assert sorted(hosts_in_order[:4]) == ["h1", "h1", "h2", "h2"]
    assert sorted(hosts_in_order[4:]) == ["h3", "h3", "h4", "h4"]
    assert all(ev[-1]["hosts"][h]["ok"] == 2 for h in ("h1", "h2", "h3", "h4"))


def test_handlers_and_flush_handlers_act_per_host(tmp_path: Path, inv: Path) -> None:
    log = tmp_path / "handled.log"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1:h2:h3
  strategy: free
  tasks:
    - name: change
      shell: "true"
      notify: record
      when: inventory_hostname != 'h3'
    - meta: flush_handlers
    - name: after flush
      shell: "grep -qx {{{{ inventory_hostname }}}} {log}"
      when: inventory_hostname != 'h3'
  handlers:
    - name: record
      shell: "echo {{{{ inventory_hostname }}}} >> {log}"
""")
    assert rc == 0, out
    assert sorted(log.read_text().split()) == ["h1", "h2"]  # once per notifying host, none for h3
    assert {e["host"] for e in ev if e["event"] == "handler_end"} == {"h1", "h2"}
    assert {e["host"]: e["status"] for e in task_ends(ev, "after flush")} == \
        {"h1": "changed", "h2": "changed", "h3": "skipped"}


def test_end_play_ends_every_host_and_records_what_was_running(tmp_path: Path, inv: Path) -> None:
    started = tmp_path / "h2-started"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1:h2
  strategy: free
  tasks:
    - name: first
      shell: "{{{{ 'touch {started}; sleep 1' if inventory_hostname == 'h2' else '{wait_for(started)}' }}}}"
    - meta: end_play
      when: inventory_hostname == 'h1'
    - name: never
      debug: {{msg: x}}
""")
    assert rc == 0, out
    assert {e["host"]: e["status"] for e in task_ends(ev, "first")} == {"h1": "changed", "h2": "changed"}
    assert task_ends(ev, "never") == []


def test_max_fail_percentage_stops_the_run_under_free(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  strategy: free
  max_fail_percentage: 30
  tasks:
    - name: maybe fail
      shell: "exit {{ 1 if inventory_hostname in ['h1', 'h2'] else 0 }}"
    - name: later
      debug: {msg: x}
    - name: much later
      debug: {msg: x}
- hosts: all
  tasks:
    - {name: second play, debug: {msg: x}}
""")
    assert rc == 2, out
    assert "max_fail_percentage 30% exceeded" in out
    assert task_ends(ev, "second play") == []
    assert sum(ev[-1]["hosts"][h]["failed"] for h in ev[-1]["hosts"]) == 2


def test_run_once_runs_on_every_host_and_says_so(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1:h2
  strategy: free
  any_errors_fatal: true
  tasks:
    - {name: once, debug: {msg: x}, run_once: true}
""")
    assert rc == 0, out
    assert sorted(e["host"] for e in task_ends(ev, "once")) == ["h1", "h2"]
    assert "run_once has no effect with strategy: free" in out
    assert "any_errors_fatal has no effect with strategy: free" in out


def test_each_result_is_shown_under_its_own_tasks_banner(tmp_path: Path, inv: Path) -> None:
    # h2's first task waits for a file that h1's third task writes: h1's third task starts only
    # once its second has been recorded, so h2's first result comes after h1's second, whatever
    # the load (h1's third and h2's first finish close together, in either order).
    flag = tmp_path / "h1-done"
    rc, out, _ = play(tmp_path, inv, f"""
- hosts: h1:h2
  strategy: free
  tasks:
    - name: first
      shell: "{{{{ '{wait_for(flag)}' if inventory_hostname == 'h2' else 'true' }}}}"
    - name: second
      shell: "true"
      when: inventory_hostname == 'h1'
    - name: third
      shell: "touch {flag}"
      when: inventory_hostname == 'h1'
""", "--no-color")
    assert rc == 0, out
    banner = None
    shown: list[tuple[str | None, str]] = []
    empty_banners = 0
    for line in out.splitlines():
        if m := re.match(r"TASK \[(.+?)\] \*+", line):
            empty_banners += banner is not None and (not shown or shown[-1][0] != banner)
            banner = m.group(1)
        elif m := re.match(r"(?:ok|changed|skipping|fatal): \[(h\d)\]", line):
            shown.append((banner, m.group(1)))
    # Each host's results, in its order, each under its own task's banner.
    for host in ("h1", "h2"):
        assert [b for b, h in shown if h == host] == ["first", "second", "third"], out
    # h1 was two tasks on when h2's first ended: that result is shown under "first" again.
    assert shown[:2] == [("first", "h1"), ("second", "h1")], out
    assert shown.index(("first", "h2")) > shown.index(("second", "h1")), out
    assert len(re.findall(r"TASK \[first\]", out)) == 2
    assert empty_banners == 0, out  # a banner comes with a result, never alone (as ansible-core)


def test_an_unknown_strategy_is_refused_before_any_host(tmp_path: Path, inv: Path) -> None:
    marker = tmp_path / "ran"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1
  strategy: fastest
  tasks:
    - shell: touch {marker}
""")
    assert rc == 4, out
    assert "pb.yml:3:" in out and "strategy" in out
    assert not marker.exists() and task_ends(ev) == []


def test_no_banner_stands_empty_while_hosts_are_on_other_tasks(tmp_path: Path, inv: Path) -> None:
    # h1 starts "second" (waiting for h2's file) before h2's "first" ends: "second"'s banner
    # must come with its result, not stand empty above h2's "first". h2 writes the file in its
    # own "second", which starts only once its "first" is recorded: so h2's "first" is shown
    # before h1's "second" whatever the load.
    flag = tmp_path / "h2-first-done"
    rc, out, _ = play(tmp_path, inv, f"""
- hosts: h1:h2
  strategy: free
  tasks:
    - name: first
      shell: "{{{{ 'sleep 0.5' if inventory_hostname == 'h2' else 'true' }}}}"
    - name: second
      shell: "{{{{ '{wait_for(flag)}' if inventory_hostname == 'h1' else 'touch {flag}' }}}}"
""", "--no-color")
    assert rc == 0, out
    lines = [line for line in out.splitlines() if re.match(r"(TASK \[|ok:|changed:|skipping:|fatal:)", line)]
    banners = [line.split(" *")[0] for line in lines if line.startswith("TASK [")]
    assert banners == ["TASK [first]", "TASK [second]"], out
    assert sorted(lines[1:3]) == ["changed: [h1]", "changed: [h2]"] and sorted(lines[4:]) == lines[1:3], out
    assert not any(a.startswith("TASK [") and b.startswith("TASK [") for a, b in itertools.pairwise(lines)), out


def test_each_hosts_result_carries_its_own_templated_task_name(tmp_path: Path, inv: Path) -> None:
    """A task named from host vars: under free each host starts it with its own title, and its
    result is recorded and shown under that title (it took the last started host's)."""
    flag = tmp_path / "h2-started"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1:h2
  strategy: free
  gather_facts: false
  tasks:
    - name: "work on {{{{ inventory_hostname }}}}"
      shell: "{{{{ 'touch {flag}' if inventory_hostname == 'h2' else '{wait_for(flag)}' }}}}"
""", "--no-color")
    assert rc == 0, out
    ends = {e["host"]: e["task"] for e in task_ends(ev)}
    assert ends == {"h1": "work on h1", "h2": "work on h2"}, ends
    assert re.search(r"^TASK \[work on h1\] \*+\nchanged: \[h1\]", out, re.M), out
    assert re.search(r"^TASK \[work on h2\] \*+\nchanged: \[h2\]", out, re.M), out
