"""The engine end to end through the CLI on real playbook files, local connection."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, cli_subprocess, opsrunner_process, read_events, task_ends


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    hosts = {f"h{i}": {"connection": "local", "idx": i} for i in range(1, 5)}
    return write_inventory(tmp_path / "inv.yml", hosts, groups={"odd": ["h1", "h3"], "even": ["h2", "h4"]})


def play(tmp_path: Path, inv: Path, body: str, *extra: str) -> tuple[int, str, list[dict]]:
    pb = write_yaml(tmp_path / "pb.yml", body)
    events = tmp_path / "events.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *extra, cwd=tmp_path)
    return res.rc, res.out + res.err, read_events(events) if events.exists() else []


def test_register_when_loop_and_statuses(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: odd
  tasks:
    - name: produce
      shell: echo "{{ inventory_hostname }}-{{ idx }}"
      register: r
    - name: only h1
      debug: {msg: "{{ r.stdout }}"}
      when: r.stdout == 'h1-1'
    - name: loop
      command: echo {{ item }}
      loop: "{{ ['a', 'b', r.stdout] }}"
      register: looped
    - assert:
        that:
          - looped.results | length == 3
          - looped.results[2].stdout == inventory_hostname ~ '-' ~ idx
""")
    assert rc == 0, out
    only = {e["host"]: e["status"] for e in task_ends(ev, "only h1")}
    assert only == {"h1": "ok", "h3": "skipped"}
    assert [e["status"] for e in task_ends(ev, "assert")] == ["ok", "ok"]
    recap = ev[-1]
    assert recap["event"] == "recap"
    assert recap["hosts"]["h1"] == {"ok": 4, "changed": 2, "unreachable": 0, "failed": 0, "skipped": 0,
                                    "rescued": 0, "ignored": 0}
    assert recap["hosts"]["h3"]["skipped"] == 1


def test_failure_stops_only_that_host_and_exit_code_2(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  tasks:
    - shell: "exit {{ 3 if inventory_hostname == 'h2' else 0 }}"
    - name: after
      shell: "true"
""")
    assert rc == 2
    assert sorted(e["host"] for e in task_ends(ev, "after")) == ["h1", "h3", "h4"]
    assert "fatal: [h2]: FAILED! => non-zero return code 3" in out
    failed = [e for e in task_ends(ev) if e["status"] == "failed"]
    assert failed[0]["rc"] == 3


def test_changed_failed_when_ignore_errors(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: not a change
      shell: echo same
      changed_when: false
    - name: custom failure
      shell: echo ERROR happened
      register: res
      failed_when: "'ERROR' in res.stdout"
      ignore_errors: true
    - name: still runs
      shell: "true"
""")
    assert rc == 0, out
    statuses = {e["task"]: (e["status"], e["ignored"]) for e in task_ends(ev)}
    assert statuses["not a change"] == ("ok", False)
    assert statuses["custom failure"] == ("failed", True)
    assert "...ignoring" in out
    assert ev[-1]["hosts"]["h1"]["ignored"] == 1


def test_until_retries(tmp_path: Path, inv: Path) -> None:
    counter = tmp_path / "count"
    rc, _out, ev = play(tmp_path, inv, f"""
- hosts: h1
  tasks:
    - name: flaky
      shell: n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; echo $n
      register: r
      until: r.stdout | int >= 3
      retries: 5
      delay: 0
    - name: never
      shell: echo 1
      register: r2
      until: r2.stdout == '2'
      retries: 2
      delay: 0
""")
    assert rc == 2
    ends = {e["task"]: e for e in task_ends(ev)}
    assert ends["flaky"]["status"] == "changed" and ends["flaky"]["data"]["attempts"] == 3
    assert ends["never"]["status"] == "failed" and "retries exhausted (3 attempts)" in ends["never"]["msg"]


def test_handlers_run_once_at_end_only_when_changed(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: odd
  tasks:
    - name: changes
      shell: "true"
      notify: restart
    - name: changes again
      shell: "true"
      notify: restart
    - name: no change
      shell: "true"
      changed_when: false
      notify: other
    - name: last task
      debug: msg=last
  handlers:
    - name: other
      debug: msg=other
    - name: restart
      shell: echo restarted
""")
    assert rc == 0, out
    kinds = [(e["event"], e["task"]) for e in ev if e["event"] in ("task_end", "handler_end")]
    handler_ends = [k for k in kinds if k[0] == "handler_end"]
    assert handler_ends == [("handler_end", "restart")] * 2
    assert kinds.index(("handler_end", "restart")) > kinds.index(("task_end", "last task"))
    assert "RUNNING HANDLER [restart]" in out


def test_check_mode_changes_nothing(tmp_path: Path, inv: Path) -> None:
    target = tmp_path / "made"
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1
  tasks:
    - name: shell
      shell: touch {target}
    - name: creates
      command:
        cmd: touch {target}
        creates: {target}
""", "--check")
    assert rc == 0, out
    assert not target.exists()
    ends = {e["task"]: e for e in task_ends(ev)}
    assert ends["shell"]["status"] == "skipped"
    assert "does not support check mode" in ends["shell"]["msg"] or "cannot be predicted" in ends["shell"]["msg"]
    assert ends["creates"]["status"] == "changed" and "would run" in ends["creates"]["msg"]


def test_tags_and_skip_tags(tmp_path: Path, inv: Path) -> None:
    body = """
- hosts: h1
  tasks:
    - {name: a, debug: msg=a, tags: [deploy]}
    - {name: b, debug: msg=b, tags: [verify]}
    - {name: c, debug: msg=c, tags: [always]}
    - {name: d, debug: msg=d, tags: [never, debugonly]}
    - {name: e, debug: msg=e}
"""
    def names(*args: str) -> list[str]:
        rc, out, ev = play(tmp_path, inv, body, *args)
        assert rc == 0, out
        return [e["task"] for e in task_ends(ev)]
    assert names() == ["a", "b", "c", "e"]
    assert names("-t", "verify") == ["b", "c"]
    assert names("--skip-tags", "deploy,always") == ["b", "e"]
    assert names("-t", "debugonly") == ["c", "d"]


def test_serial_batches_and_failed_batch_stops_play(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: all:!loner
  serial: 2
  tasks:
    - name: one
      debug: msg=1
    - name: two
      debug: msg=2
""")
    assert rc == 0, out
    order = [(e["task"], e["host"]) for e in task_ends(ev)]
    batch1 = order[:4]
    assert {h for _, h in batch1} == {"h1", "h2"} and [t for t, _ in batch1] == ["one", "one", "two", "two"]
    assert {h for _, h in order[4:]} == {"h3", "h4"}
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  serial: "50%"
  tasks:
    - shell: "exit 1"
""")
    assert rc == 2
    assert {e["host"] for e in task_ends(ev)} == {"h1", "h2"}  # second batch never started
    assert "every host of the batch failed" in out


def test_any_errors_fatal_and_max_fail_percentage(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  any_errors_fatal: true
  tasks:
    - shell: "exit {{ 1 if inventory_hostname == 'h1' else 0 }}"
    - name: after
      debug: msg=x
""")
    assert rc == 2
    assert task_ends(ev, "after") == []
    rc, out, ev = play(tmp_path, inv, """
- hosts: all
  max_fail_percentage: 30
  tasks:
    - shell: "exit {{ 1 if inventory_hostname in ['h1', 'h2'] else 0 }}"
    - name: after
      debug: msg=x
""")
    assert rc == 2
    assert task_ends(ev, "after") == []
    assert "max_fail_percentage 30% exceeded" in out


def test_timeout_kills_the_command_tree_and_reports_timed_out(tmp_path: Path, inv: Path,
                                                               cleanup_marker: str) -> None:
    start = time.monotonic()
    rc, out, ev = play(tmp_path, inv, f"""
- hosts: h1
  tasks:
    - name: slow
      shell: "sleep {cleanup_marker} & sleep {cleanup_marker}"
      timeout: 1.5
""")
    assert rc == 2
    assert time.monotonic() - start < 8
    (end,) = task_ends(ev, "slow")
    assert end["status"] == "timed_out"
    assert "TIMED OUT!" in out
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_extra_vars_forms(tmp_path: Path, inv: Path) -> None:
    vf = write_yaml(tmp_path / "ev.yml", {"from_file": "F"})
    rc, out, _ev = play(tmp_path, inv, """
- hosts: h1
  vars: {a: play}
  tasks:
    - assert:
        that: ["a == 'cli'", "from_file == 'F'", "j == [1, 2]"]
""", "-e", "a=cli", "-e", f"@{vf}", "-e", '{"j": [1, 2]}')
    assert rc == 0, out


def test_limit_and_list_hosts_and_tasks(tmp_path: Path, inv: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", """
- name: p
  hosts: all
  tasks:
    - {name: first, debug: msg=x, tags: [t1], timeout: 5}
  handlers:
    - {name: h, debug: msg=x}
""")
    res = cli("play", str(pb), "-i", str(inv), "--list-hosts", "-l", "odd:!h3", cwd=tmp_path)
    assert res.rc == 0
    assert "HOSTS (1):" in res.out and "    h1" in res.out and "h3" not in res.out
    res = cli("play", str(pb), "-i", str(inv), "--list-tasks", cwd=tmp_path)
    assert "first  [debug]  timeout=5\tTAGS: [t1]" in res.out
    assert "handler: h  [debug]" in res.out
    # as ansible-playbook --list-tags: the play's own tags, then those of the tasks selected
    tagged = write_yaml(tmp_path / "tagged.yml", """
- name: p
  hosts: all
  tags: [web]
  tasks:
    - {name: first, debug: msg=x, tags: [t1]}
    - {name: second, debug: msg=x, tags: [t2, always]}
    - {name: hidden, debug: msg=x, tags: [never, debugonly]}
- name: q
  hosts: all
  tags: [p2]
  tasks:
    - {name: only, debug: msg=x, tags: [never]}
""")
    res = cli("play", str(tagged), "-i", str(inv), "--list-tags", cwd=tmp_path)
    assert res.rc == 0, res.err
    # `never` tasks' tags too (the tags that must be asked for); a play's own tags always
    assert res.out.endswith("  play #1 (all): p\tTAGS: [web]\n      TASK TAGS: [always, debugonly, never, t1, t2, "
                            "web]\n\n  play #2 (all): q\tTAGS: [p2]\n      TASK TAGS: [never, p2]\n\n"), res.out
    res = cli("play", str(tagged), "-i", str(inv), "--list-tags", "--skip-tags", "t1", cwd=tmp_path)
    assert "      TASK TAGS: [always, t2, web]\n" in res.out and "      TASK TAGS: [p2]\n" in res.out


def test_verbose_vvv_prints_commands_as_sent(tmp_path: Path, inv: Path) -> None:
    rc, out, _ = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - shell: echo "quoted 'x'"
""", "-vvv")
    assert rc == 0
    # Run by the host's agent (its source is not printed), the script on stdin.
    assert "<h1> SENT: agent exec /bin/sh -c 'IFS= read -r opsrunner_n" in out
    assert "<h1> SENT: '<opsrunner-agent start: cached package>'" in out
    assert '    script on stdin:\n    | echo "quoted \'x\'"' in out
    assert "import" not in out  # no agent source
    rc, out, _ = play(tmp_path, inv, """
- hosts: h1
  vars: {command_exec: bare}
  tasks:
    - shell: echo "quoted 'x'"
""", "-vvv")
    assert rc == 0
    # A bare exec runs under the deadline watchdog (default_timeout; its source abbreviated).
    assert f"<h1> SENT: {sys.executable} -S -c <opsrunner-watchdog> 3600 /bin/sh -c 'IFS= read -r opsrunner_n" in out
    assert '    script on stdin:\n    | echo "quoted \'x\'"' in out


def test_bad_options_exit_5_and_a_command_line_that_does_not_parse_2(tmp_path: Path) -> None:
    # As ansible-playbook: its argument parser exits 2 (an unknown option, a missing argument)
    assert cli("play").rc == 2
    assert cli("play", "x.yml", "--forks", "zero").rc == 2
    assert cli("play", "x.yml", "--no-such-option").rc == 2
    assert cli("nosuchcommand").rc == 2
    assert cli("schema", "nosuchmodule").rc == 5


def test_schema_command_prints_valid_json() -> None:
    res = cli("schema", "list")
    names = res.out.split()
    assert {"playbook", "inventory", "kill_old", "launch_detached"} <= set(names)
    for name in names:
        out = cli("schema", name).out
        assert json.loads(out)["$schema"].startswith("https://json-schema.org/")


def test_version_check_and_list_tasks_do_not_import_paramiko(tmp_path: Path) -> None:
    probe = (
        "import sys, io; from opsrunner.cli import main; "
        "rc = main(sys.argv[1:], io.StringIO(), io.StringIO()); "
        "print(rc, 'paramiko' in sys.modules, 'fabric' in sys.modules)"
    )
    for args in (["--version"], ["check", "restart_training.yml"],
                 ["play", "restart_training.yml", "--list-tasks"]):
        out = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out[-3:] == ["0", "False", "False"], (args, out)


def test_interrupt_stops_in_flight_commands_prints_recap_exit_99(tmp_path: Path, inv: Path,
                                                                  cleanup_marker: str) -> None:
    import signal
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: h1
  tasks:
    - shell: sleep {cleanup_marker}
""")
    # Ended by pid when the block ends, pass or fail: a Ctrl-C it never sees (SIGINT ignored,
    # as a background shell leaves it) must not leave it running.
    with opsrunner_process("play", str(pb), "-i", str(inv), cwd=tmp_path) as proc:
        assert wait_for(lambda: bool(pids_with(cleanup_marker)), 10)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 99, out
    assert "PLAY RECAP" in out
    assert wait_for(lambda: not pids_with(cleanup_marker), 5)


def test_the_command_exits_with_everything_written(tmp_path: Path, inv: Path) -> None:
    # `opsrunner` skips the interpreter's teardown (cli.run): its output through a pipe, the
    # JSON events file and the run history must still be complete, and the exit code kept.
    tasks = "".join(f"    - {{name: t{i}, debug: {{msg: '{'x' * 2000}'}}}}\n" for i in range(40))
    tasks += "    - {name: last, fail: {msg: boom}}\n"
    pb = write_yaml(tmp_path / "pb.yml", f"- hosts: h1,h2\n  tasks:\n{tasks}")
    events, history = tmp_path / "events.jsonl", tmp_path / "history.db"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events), "--history", str(history),
                         cwd=tmp_path)
    assert res.rc == 2, res.out + res.err
    assert len(res.out) > 160_000 and res.out.rstrip().endswith("ignored=0")  # the recap's last line
    assert read_events(events)[-1]["event"] == "recap"
    [run] = json.loads(cli("history", "--json", "--history", str(history), cwd=tmp_path).out)
    shown = json.loads(cli("show", run["id"], "--json", "--history", str(history), cwd=tmp_path).out)
    assert (shown["exit_code"], len(shown["tasks"])) == (2, 82)  # 41 tasks on 2 hosts, all recorded


FREEZE_PROBE = """
import gc, sys
from opsrunner import cli
seen = {}
import opsrunner.engine as engine
run = engine.Engine.run
def probe(self):
    seen["frozen"], seen["threshold"] = gc.get_freeze_count(), gc.get_threshold()
    return run(self)
engine.Engine.run = probe
import atexit
atexit.register(lambda: sys.stderr.write("probe %d %d\\n" % (seen["frozen"], seen["threshold"][0])))
sys.argv = ["opsrunner"] + sys.argv[1:]
cli.run()
"""


def test_the_heap_is_frozen_for_the_play_only_in_a_process_of_its_own(tmp_path: Path, inv: Path) -> None:
    # `opsrunner` (cli.run) moves what is loaded before the play out of the cyclic GC's way;
    # main() called in a process that lives on (as here) must leave the GC as it found it.
    pb = write_yaml(tmp_path / "pb.yml", "- hosts: h1\n  tasks:\n    - {name: t, debug: {msg: hi}}\n")
    threshold = gc.get_threshold()
    assert cli("play", str(pb), "-i", str(inv), "--no-history", cwd=tmp_path).rc == 0
    assert (gc.get_freeze_count(), gc.get_threshold()) == (0, threshold)
    proc = subprocess.run([sys.executable, "-c", FREEZE_PROBE, "play", str(pb), "-i", str(inv), "--no-history"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    frozen, young = map(int, proc.stderr.split("probe ")[1].split())
    assert frozen > 10_000 and young == 5000


def test_playbook_lookup_in_playbooks_dir() -> None:
    res = cli_subprocess("check", "status.yml")
    assert res.rc == 0, res.err
    assert "playbooks/status.yml: OK" in res.out


def test_block_rescue_always_counts_rescued(tmp_path: Path, inv: Path) -> None:
    rc, _, ev = play(tmp_path, inv, """
- hosts: all
  tasks:
    - name: restart with rollback
      when: inventory_hostname != 'h4'
      vars: {v: from-block}
      block:
        - name: try
          shell: "echo {{ v }}; exit {{ 1 if inventory_hostname in ['h1', 'h3'] else 0 }}"
        - name: after try
          debug: msg=after
      rescue:
        - name: rollback
          shell: "exit {{ 1 if inventory_hostname == 'h3' else 0 }}"
      always:
        - name: cleanup
          debug: msg=cleanup
    - name: last
      debug: msg=last
""")
    assert rc == 2  # h3's rescue failed too
    hosts_of = lambda task: sorted(e["host"] for e in task_ends(ev, task) if e["status"] != "skipped")  # noqa: E731
    assert hosts_of("try") == ["h1", "h2", "h3"]
    assert {e["stdout_tail"] for e in task_ends(ev, "try") if e["host"] != "h4"} == {"from-block"}
    assert hosts_of("after try") == ["h2"]
    assert hosts_of("rollback") == ["h1", "h3"]
    assert hosts_of("cleanup") == ["h1", "h2", "h3"]
    assert hosts_of("last") == ["h1", "h2", "h4"]
    recap = ev[-1]["hosts"]
    assert (recap["h1"]["rescued"], recap["h1"]["failed"]) == (1, 0)
    assert (recap["h3"]["rescued"], recap["h3"]["failed"]) == (1, 1)
    assert recap["h4"]["skipped"] == 3


def test_key_value_arguments(tmp_path: Path, inv: Path) -> None:
    rc, out, ev = play(tmp_path, inv, """
- hosts: h1
  tasks:
    - name: kv
      command: cmd=pwd chdir=/tmp
    - name: pause
      pause: seconds=0
""")
    assert rc == 0, out
    assert task_ends(ev, "kv")[0]["stdout_tail"] == "/tmp"
