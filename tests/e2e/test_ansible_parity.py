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


def test_when_on_a_non_boolean_string_is_an_error(tmp_path: Path, inv: Path) -> None:
    # ansible-core 2.19 fails the task ("Conditional result (True) was derived from value of type
    # 'str' ... Conditionals must have a boolean result"). opsrunner's preflight finds the same
    # error on every host before the run, so it refuses the playbook (exit 4, nothing run).
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  vars: {sv: "yes"}
  tasks:
    - {name: strvar, debug: {msg: hi}, when: sv, ignore_errors: true}
    - {name: after, debug: {msg: hi}}
""")
    assert rc == 4, out
    assert "pb.yml:5:40: Conditional result (True) was derived from value of type 'str'" in out
    assert "Conditionals must have a boolean result" in out and task_ends(ev) == []
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  vars: {sv: "yes"}
  tasks:
    - {name: cast, debug: {msg: hi}, when: sv | bool}
""")
    assert rc == 0 and statuses(ev, "cast") == {"h1": "ok"}


def test_when_is_evaluated_per_loop_item(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: per item
      debug: {msg: "{{ item }}"}
      loop: [1, 2, 3]
      when: item != 2
      register: wpi
    - name: undefined loop, false when
      debug: {msg: "{{ item }}"}
      loop: "{{ nope }}"
      when: false
    - assert:
        that:
          - wpi.results[0] is not skipped and wpi.results[1] is skipped and wpi.results[2] is not skipped
          - wpi.results[1].skip_reason == 'Conditional result was False'
          - wpi.results[1].item == 2
          - wpi is not skipped
""")
    assert rc == 0, out
    assert statuses(ev, "per item") == {"h1": "ok"}
    assert statuses(ev, "undefined loop, false when") == {"h1": "skipped"}
    assert statuses(ev, "assert") == {"h1": "ok"}


def test_retries_without_until_and_attempts_as_ansible(tmp_path: Path, inv: Path) -> None:
    counter = tmp_path / "count"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1
  tasks:
    - name: retries alone
      shell: n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]
      retries: 4
      delay: 0
      register: rnu
    - name: always fails
      command: "false"
      retries: 2
      delay: 0
      register: af
      ignore_errors: true
    - name: until with failed_when false
      command: "false"
      until: ufw.rc == 0
      retries: 2
      delay: 0
      failed_when: false
      register: ufw
    - assert:
        that: [rnu.attempts == 3, rnu.rc == 0, af.attempts == 2, ufw.attempts == 2, ufw.rc == 1]
""")
    assert rc == 0, out
    assert counter.read_text().strip() == "3"
    assert statuses(ev, "retries alone") == {"h1": "changed"}
    assert statuses(ev, "always fails") == {"h1": "failed"}
    # ansible-core: the until loop ran out, but failed_when decides: changed, not failed.
    assert statuses(ev, "until with failed_when false") == {"h1": "changed"}
    # ansible-core 2.19 printed: ok=4 changed=3 failed=0 ignored=1
    assert recap(ev, "h1") == {"ok": 4, "changed": 3, "unreachable": 0, "failed": 0, "skipped": 0,
                               "rescued": 0, "ignored": 1}


def test_suppressed_command_failure_counts_changed_and_notifies(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: suppressed
      command: "false"
      failed_when: false
      notify: h
  handlers:
    - name: h
      debug: {msg: handler ran}
""")
    assert rc == 0, out
    assert statuses(ev, "suppressed") == {"h1": "changed"}
    assert statuses(ev, "h") == {"h1": "ok"}
    assert recap(ev, "h1")["changed"] == 1 and recap(ev, "h1")["ok"] == 2


def test_skipped_registered_result_and_undefined_debug_var(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: skipped_reg
      command: "true"
      when: false
      register: sk
    - assert:
        that:
          - sk is skipped
          - sk is not changed
          - sk.rc is not defined
          - sk.stdout is not defined
          - sk.skip_reason == 'Conditional result was False'
    - name: undefined var
      debug: var=nope_undefined
""")
    assert rc == 0, out
    assert statuses(ev, "assert") == {"h1": "ok"}
    assert statuses(ev, "undefined var") == {"h1": "ok"}
    assert "nope_undefined: << error 1 - 'nope_undefined' is undefined >>" in out  # ansible-core 2.19.14's words


HANDLERS = """
- hosts: h1,h2,h3
  tasks:
    - name: t1
      command: "true"
      notify: [h1, topic]
    - meta: flush_handlers
    - name: t2
      debug: {msg: after flush}
    - name: t3
      command: "true"
      notify: h1
    - name: end one host
      meta: end_host
      when: inventory_hostname == 'h2'
    - name: t4
      debug: {msg: t4}
    - name: fail h1
      command: "false"
      when: inventory_hostname == 'h1'
    - name: t5
      debug: {msg: t5}
  handlers:
    - name: h1
      command: "true"
      notify: h2
    - name: h2
      debug: {msg: h2 ran}
    - name: h3
      debug: {msg: h3 via listen}
      listen: topic
"""


def _handler_runs(ev: list[dict]) -> list[tuple[str, str]]:
    return [(e["task"], e["host"]) for e in ev if e["event"] == "handler_end"]


@pytest.mark.parametrize("force", [False, True])
def test_handlers_flush_listen_chain_end_host_force(tmp_path: Path, inv: Path, force: bool) -> None:
    rc, out, ev = play(tmp_path, inv, HANDLERS, *(["--force-handlers"] if force else []))
    assert rc == 2, out
    runs = _handler_runs(ev)
    # flush_handlers: h1 (by name), h3 (listen topic), then h2 notified by handler h1.
    first = runs[:9]
    assert sorted(first) == sorted((h, x) for h in ("h1", "h2", "h3") for x in ("h1", "h2", "h3"))
    assert [t for t, _ in first] == ["h1"] * 3 + ["h2"] * 3 + ["h3"] * 3
    assert statuses(ev, "t2") == {"h1": "ok", "h2": "ok", "h3": "ok"}
    # end_host: h2 runs nothing more, not even its notified handlers; meta is not in the recap.
    assert statuses(ev, "t4") == {"h1": "ok", "h3": "ok"}
    assert statuses(ev, "t5") == {"h3": "ok"}
    end = sorted(runs[9:])
    # The failed host h1 runs its handlers only with --force-handlers.
    expected = [("h1", "h3"), ("h2", "h3")]
    if force:
        expected = sorted([*expected, ("h1", "h1"), ("h2", "h1")])
    assert end == expected
    # ansible-core 2.19 recap (hosts a, b, c for h1, h2, h3):
    assert recap(ev, "h2") == {"ok": 6, "changed": 3, "unreachable": 0, "failed": 0, "skipped": 0,
                               "rescued": 0, "ignored": 0}
    assert recap(ev, "h3") == {"ok": 10, "changed": 4, "unreachable": 0, "failed": 0, "skipped": 1,
                               "rescued": 0, "ignored": 0}
    assert recap(ev, "h1") == {"ok": 9 if force else 7, "changed": 4 if force else 3, "unreachable": 0,
                               "failed": 1, "skipped": 0, "rescued": 0, "ignored": 0}


def test_meta_end_play_skips_handlers_and_goes_to_next_play(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - {name: t1, command: "true", notify: h}
    - {name: end, meta: end_play}
    - {name: t2, debug: {msg: never}}
  handlers:
    - {name: h, debug: {msg: never}}
- hosts: h1
  tasks:
    - {name: second, debug: {msg: second play}}
""")
    assert rc == 0, out
    assert task_ends(ev, "t2") == [] and _handler_runs(ev) == []
    assert statuses(ev, "second") == {"h1": "ok"}
    assert recap(ev, "h1") == {"ok": 2, "changed": 1, "unreachable": 0, "failed": 0, "skipped": 0,
                               "rescued": 0, "ignored": 0}


def test_any_errors_fatal_sends_the_batch_to_rescue_and_runs_always(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1,h2,h3
  any_errors_fatal: true
  tasks:
    - block:
        - name: fail h1
          command: "false"
          when: inventory_hostname == 'h1'
        - {name: after fail, debug: {msg: after}}
      rescue:
        - name: rescue
          debug:
            msg: "rescued {{ ansible_failed_task.name | default('-') }}
              rc={{ ansible_failed_result.rc | default('-') }}"
          register: res
      always:
        - {name: always, debug: {msg: always}}
    - {name: next, debug: {msg: next}}
- hosts: h1,h2,h3
  any_errors_fatal: true
  tasks:
    - block:
        - name: fail h2
          command: "false"
          when: inventory_hostname == 'h2'
        - {name: after fail 2, debug: {msg: after}}
      always:
        - {name: always2, debug: {msg: always}}
    - {name: next2, debug: {msg: next}}
""")
    assert rc == 2, out
    assert task_ends(ev, "after fail") == []
    assert statuses(ev, "rescue") == {"h1": "ok", "h2": "ok", "h3": "ok"}
    rescue_msgs = {e["host"]: e["msg"] for e in task_ends(ev, "rescue")}
    assert rescue_msgs == {"h1": "rescued fail h1 rc=1", "h2": "rescued - rc=-", "h3": "rescued - rc=-"}
    assert statuses(ev, "always") == {"h1": "ok", "h2": "ok", "h3": "ok"}
    assert statuses(ev, "next") == {"h1": "ok", "h2": "ok", "h3": "ok"}
    # Second play: no rescue: always still runs on every host, then the run stops.
    assert task_ends(ev, "after fail 2") == []
    assert statuses(ev, "always2") == {"h1": "ok", "h2": "ok", "h3": "ok"}
    assert task_ends(ev, "next2") == []
    assert recap(ev, "h1")["rescued"] == 1 and recap(ev, "h2")["rescued"] == 0
    assert recap(ev, "h2")["failed"] == 1 and recap(ev, "h3")["failed"] == 0


def test_serial_list_and_play_hosts_are_the_batch(tmp_path: Path) -> None:
    hosts = {f"h{i}": {"connection": "local"} for i in range(1, 6)}
    inv5 = write_inventory(tmp_path / "inv5.yml", hosts)
    rc, out, ev = play(tmp_path, inv5, """
- hosts: all
  serial: [1, "50%"]
  tasks:
    - name: show
      debug:
        msg: "{{ play_hosts | join(',') }}|{{ ansible_play_batch | join(',') }}|{{
          ansible_play_hosts | join(',') }}"
""")
    assert rc == 0, out
    msgs = {e["host"]: e["msg"] for e in task_ends(ev, "show")}
    every = "h1,h2,h3,h4,h5"
    assert msgs == {"h1": f"h1|h1|{every}", "h2": f"h2,h3|h2,h3|{every}", "h3": f"h2,h3|h2,h3|{every}",
                    "h4": f"h4,h5|h4,h5|{every}", "h5": f"h4,h5|h4,h5|{every}"}
    starts = [e["hosts"] for e in ev if e["event"] == "task_start"]
    assert starts == [["h1"], ["h2", "h3"], ["h4", "h5"]]


def test_templated_tags(tmp_path: Path, inv: Path) -> None:
    body = """
- hosts: h1
  vars: {t: deploy}
  tasks:
    - {name: tagged, debug: {msg: tagged}, tags: "{{ t }}"}
    - {name: other, debug: {msg: other}, tags: [other]}
"""
    rc, out, ev = play(tmp_path, inv, body, "--tags", "deploy")
    assert rc == 0, out
    assert statuses(ev, "tagged") == {"h1": "ok"} and task_ends(ev, "other") == []
    rc, out, ev = play(tmp_path, inv, body, "--skip-tags", "deploy")
    assert task_ends(ev, "tagged") == [] and statuses(ev, "other") == {"h1": "ok"}


def test_role_vars_are_visible_to_later_tasks_of_the_play(tmp_path: Path, inv: Path) -> None:
    write_yaml(tmp_path / "roles/r1/vars/main.yml", {"from_role": "role value"})
    write_yaml(tmp_path / "roles/r1/tasks/main.yml", [{"name": "in role", "debug": {"msg": "{{ from_role }}"}}])
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  roles: [r1]
  tasks:
    - {name: after role, debug: {msg: "{{ from_role }}"}}
""")
    assert rc == 0, out
    assert [e["msg"] for e in task_ends(ev, "after role")] == ["role value"]


def test_a_none_renders_as_ansible_core_renders_it(tmp_path: Path, inv: Path) -> None:
    # ansible-core 2.19: a template that is only `{{ x }}` gives None itself; around text, or
    # beside another expression, a None part is left out (`a{{ x }}b` is "ab", never "aNoneb").
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  vars: {x: null, n: 5}
  tasks:
    - {name: alone, debug: {msg: "{{ x }}"}}
    - {name: around, debug: {msg: "a{{ x }}b"}}
    - {name: cmd, command: "echo a{{ x }}b {{ x }}", register: r}
    - name: typed
      set_fact: {alone: "{{ x }}", around: "a{{ x }}b", one_left: "{{ x }}{{ n }}", both: "{{ x }}{{ x }}"}
    - {name: show, debug: {msg: "{{ [r.stdout, alone, around, one_left, both, x ~ 'z'] | to_json }}"}}
""")
    assert rc == 0, out
    msgs = {e["task"]: e["msg"] for e in task_ends(ev)}
    assert (msgs["alone"], msgs["around"]) == ("null", "ab")
    assert msgs["show"] == '["ab", null, "ab", 5, null, "Nonez"]'  # `~` is Jinja's own str(): as in ansible-core
