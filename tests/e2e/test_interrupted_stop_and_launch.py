"""What a run interrupted (SIGTERM) in the middle of a stop or a launch leaves behind, and
what the next verify makes of it.

A launch cut short after its job started (the agent ends what the request started when the
controller goes) leaves a launch record naming that job and where its output starts in the
log: the next status speaks of it, not of the job the run had stopped, and never blames it
for an older run's Traceback earlier in the same log. A stop cut short records the signal it
sent, to which pid, and what still ran at the last look. A job opsrunner stopped is later
said to have been stopped by it, not left to read as a crash."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from tests.conftest import pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, opsrunner_process, read_events, task_ends


def _play(tmp_path: Path, name: str, tasks: str) -> Path:
    return write_yaml(tmp_path / f"{name}.yml", f"- hosts: all\n  gather_facts: false\n  tasks:\n{tasks}")


def _status(tmp_path: Path, pidfile: Path, log: Path) -> tuple[int, dict[str, Any]]:
    """The status playbook's verify, as the restart role's status.yml asks it."""
    pb = _play(tmp_path, "status", f"""
    - name: status
      verify:
        pidfile: {pidfile}
        processes: 1
        log: {log}
        log_not_regex: Traceback
""")
    events = tmp_path / "status.jsonl"
    res = cli("play", str(pb), "-i", str(tmp_path / "inv.yml"), "--json-events", str(events))
    (end,) = task_ends(read_events(events), "status")
    return res.rc, end


def _start_old_job(tmp_path: Path, command: str, pidfile: Path, log: Path) -> int:
    pb = _play(tmp_path, "old", f"""
    - name: old run
      launch_detached:
        command: {json.dumps(command)}
        pidfile: {pidfile}
        log: {log}
""")
    res = cli("play", str(pb), "-i", str(tmp_path / "inv.yml"))
    assert res.rc == 0, res.out + res.err
    return int(pidfile.read_text())


def _interrupted_run(tmp_path: Path, tasks: str, ready: Any) -> tuple[int, str, list[dict[str, Any]]]:
    """A run of `tasks` that gets SIGTERM once ready(controller pid) says so."""
    pb = _play(tmp_path, "run", tasks)
    events = tmp_path / "run.jsonl"
    with opsrunner_process("play", str(pb), "-i", str(tmp_path / "inv.yml"), "--json-events", str(events),
                           "--history", str(tmp_path / "history.db"), "--no-color") as controller:
        (tmp_path / "controller.pid").write_text(str(controller.pid))
        ready(controller)
        if controller.poll() is None:
            controller.send_signal(signal.SIGTERM)
        out = controller.communicate(timeout=60)[0]
    return controller.returncode, out, read_events(events)


def test_a_launch_cut_short_after_its_job_started_is_what_the_next_status_reports(
        tmp_path: Path, cleanup_marker: str) -> None:
    write_inventory(tmp_path / "inv.yml", {"h": {"connection": "local"}})
    pidfile, log, meta = tmp_path / "train.pid", tmp_path / "train.log", tmp_path / "train.launch.json"
    log.write_text("Traceback (most recent call last):\nRuntimeError: an older run crashed\n")
    old = _start_old_job(tmp_path, f"sleep {cleanup_marker}", pidfile, log)
    # The new job, once started, freezes the agent's worker serving the launch (its
    # supervisor's parent) before that launch answers, then interrupts the controller: the
    # agent ends the launch's processes, the job among them, after its first log line.
    ctl = tmp_path / "controller.pid"
    job = (f'echo "ready: training (pid $$)"; '
           f'until [ "$(cat {pidfile} 2>/dev/null)" = "$$" ] || [ ! -e {meta} ]; do sleep 0.01; done; '
           f'kill -STOP $(cut -d" " -f4 /proc/$PPID/stat); '
           f'until [ -s {ctl} ]; do sleep 0.01; done; kill -TERM $(cat {ctl}); exec sleep {cleanup_marker}')
    size_before = log.stat().st_size
    rc, out, events = _interrupted_run(tmp_path, f"""
    - name: stop
      kill_old:
        pidfile: {pidfile}
        grace: 5
    - name: launch
      launch_detached:
        command: {json.dumps(job)}
        pidfile: {pidfile}
        log: {log}
""", lambda controller: controller.wait(60))
    assert rc == 143, out
    (launch,) = task_ends(events, "launch")
    assert launch["status"] == "interrupted", launch
    assert "launch interrupted before the target answered" in launch["msg"], launch
    assert f"the launch record beside {pidfile}" in launch["msg"], launch

    new = int(pidfile.read_text())
    assert new != old
    record = json.loads(meta.read_text())
    assert record["pid"] == new and record["start"] and record["log_offset"] == size_before, record
    assert f"ready: training (pid {new})" in log.read_text()

    rc, status = _status(tmp_path, pidfile, log)
    assert rc == 2 and status["status"] == "failed", status
    diagnosis = status["data"]["diagnosis"]
    assert f"pid {new} " in diagnosis and str(old) not in status["msg"], status["msg"]
    assert "Traceback" not in status["msg"].split("\nlast lines")[0], status["msg"]  # not this run's output


def test_a_stop_cut_short_records_the_signal_it_sent_and_what_still_ran(tmp_path: Path, cleanup_marker: str) -> None:
    write_inventory(tmp_path / "inv.yml", {"h": {"connection": "local"}})
    pidfile, log, meta = tmp_path / "train.pid", tmp_path / "train.log", tmp_path / "train.launch.json"
    pid = _start_old_job(tmp_path, f"trap '' TERM; exec sleep {cleanup_marker}", pidfile, log)

    def signalled(controller: Any) -> None:
        wait_for(lambda: "stopped" in json.loads(meta.read_text()), 10)  # the target has signalled it
        time.sleep(1.6)  # past the first of the stop's one-second looks at what still runs

    rc, out, events = _interrupted_run(tmp_path, f"""
    - name: stop
      kill_old:
        pidfile: {pidfile}
        grace: 30
      timeout: 60
""", signalled)
    assert rc == 143, out
    (stop,) = task_ends(events, "stop")
    msg = stop["msg"]
    assert stop["status"] == "interrupted" and msg.startswith("stop interrupted: sent SIGTERM to 1 at "), stop
    assert f": {pid} (sleep {cleanup_marker})" in msg, msg
    assert f"(the last look): {pid}; SIGKILL after 30s grace was not sent" in msg, msg
    assert pids_with(cleanup_marker) == [pid]  # SIGTERM ignored, no SIGKILL: it still runs, as said
    row = json.loads(cli("show", "last", "--json", "--history", str(tmp_path / "history.db")).out)
    assert row["tasks"][-1]["msg"] == msg, row["tasks"][-1]


def test_a_job_opsrunner_stopped_is_said_to_be_stopped_by_it(tmp_path: Path, cleanup_marker: str) -> None:
    write_inventory(tmp_path / "inv.yml", {"h": {"connection": "local"}})
    pidfile, log = tmp_path / "train.pid", tmp_path / "train.log"
    pid = _start_old_job(tmp_path, f"sleep {cleanup_marker}", pidfile, log)
    res = cli("play", str(_play(tmp_path, "stop", f"""
    - name: stop
      kill_old:
        pidfile: {pidfile}
""")), "-i", str(tmp_path / "inv.yml"))
    assert res.rc == 0 and f"killed 1: {pid}" in res.out, res.out
    rc, status = _status(tmp_path, pidfile, log)
    assert rc == 2, status
    diagnosis = status["data"]["diagnosis"]
    assert diagnosis.startswith(f"the job (pid {pid}) was killed by signal 15 (SIGTERM)"), diagnosis
    assert "; opsrunner had sent it SIGTERM at " in diagnosis and diagnosis.endswith(" to stop it"), diagnosis
