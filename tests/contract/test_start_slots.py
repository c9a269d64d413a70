"""`--connect-slots`: how many hosts start their connection and agent at once, and
connect_timeout counted from a host's turn (connections/startslots.py).

Five hosts, each behind a wrapper that takes 1 s before it runs the agent and writes when it
started and ended: with one slot the starts never overlap, and the last host, over 4 s after the
first, is not unreachable although its connect_timeout is 3 s; with five slots they overlap
(the measure sees concurrency when there is some).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import wait_for, write_inventory
from tests.helpers import cli, opsrunner_process
from tests.sshd import PrivateSSHD

HOSTS = 5


def _slow_wrapper(folder: Path, log: Path, seconds: float = 1) -> Path:
    script = folder / "slow-exec.sh"
    script.write_text(f'#!/bin/sh\necho "start $(date +%s.%N)" >> {log}\nsleep {seconds}\n'
                      f'echo "end $(date +%s.%N)" >> {log}\nexec "$@"\n')
    script.chmod(0o755)
    return script


def _most_at_once(log: Path) -> int:
    """The most wrapper starts that were under way at the same moment."""
    marks = sorted((float(t), kind == "start") for kind, t in (line.split() for line in log.read_text().splitlines()))
    most = now = 0
    for _t, is_start in marks:  # at equal times an end sorts first (False < True): no false overlap
        now += 1 if is_start else -1
        most = max(most, now)
    return most


def _probe_play(sshd: PrivateSSHD, folder: Path, hosts: int, wrapper: Path, task: dict[str, Any] | None = None,
                **host_vars: Any) -> list[str]:
    """Files for a play of one agent task (`stat /`, plus `task`) on `hosts` aliases of the
    sshd behind `wrapper`: the command line's arguments after `play`."""
    inv = write_inventory(folder / "inv.yml", {
        f"h{i}": sshd.host_vars(wrapper=[str(wrapper)], python_interpreter=sys.executable, **host_vars)
        for i in range(hosts)})
    pb = folder / "pb.yml"
    pb.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False,
                                   "tasks": [{"name": "probe", "stat": {"path": "/"}, **(task or {})}]}]))
    return [str(pb), "-i", str(inv), "-f", str(hosts)]


def _run(sshd: PrivateSSHD, folder: Path, slots: int) -> tuple[int, str, Path]:
    folder.mkdir()
    log = folder / "starts.log"
    args = _probe_play(sshd, folder, HOSTS, _slow_wrapper(folder, log), connect_timeout=3)
    res = cli("play", *args, "--connect-slots", str(slots), cwd=folder)
    return res.rc, res.out + res.err, log


def test_one_slot_starts_hosts_one_at_a_time_and_none_times_out_waiting(sshd: PrivateSSHD, tmp_path: Path) -> None:
    rc, out, log = _run(sshd, tmp_path / "one", 1)
    assert rc == 0, out
    assert "unreachable=1" not in out and out.count("unreachable=0") == HOSTS, out
    assert len(log.read_text().splitlines()) == 2 * HOSTS
    assert _most_at_once(log) == 1, log.read_text()


def test_with_a_slot_each_the_hosts_start_together(sshd: PrivateSSHD, tmp_path: Path) -> None:
    rc, out, log = _run(sshd, tmp_path / "five", HOSTS)
    assert rc == 0, out
    assert _most_at_once(log) >= 2, log.read_text()


def test_counts_below_one_are_bad_input_named_by_option(tmp_path: Path) -> None:
    """`--connect-slots 0` and `--forks 0` are values the run needs, like `--slice`: exit 4, each
    named with its option, before any host is touched (the inventory's host is never dialled)."""
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: all\n  tasks:\n    - {name: probe, command: 'true'}\n")
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1: {host: 127.0.0.1, port: 9}\n")
    res = cli("play", str(pb), "-i", str(inv), "--connect-slots", "0", "-f", "0", cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert "command line: --connect-slots 0: must be at least 1 (at --connect-slots)" in res.err
    assert "command line: --forks 0: must be at least 1 (at --forks)" in res.err
    assert "2 error(s); nothing was run." in res.err and "PLAY RECAP" not in res.out


def test_ctrl_c_starts_none_of_the_hosts_still_waiting_for_their_turn(sshd: PrivateSSHD, tmp_path: Path) -> None:
    """Interrupted while the first host starts, the run ends without starting the others: once
    the run's connections are closed, a host thread that was waiting for a slot is not
    connected (it would have been, as the first start's slot came free)."""
    log = tmp_path / "starts.log"
    args = _probe_play(sshd, tmp_path, 4, _slow_wrapper(tmp_path, log, 3))
    with opsrunner_process("play", *args, "--connect-slots", "1", "--no-history", cwd=tmp_path) as proc:
        assert wait_for(lambda: log.exists() and "start" in log.read_text(), 30), "no host started"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    time.sleep(4)  # past the first start's 3 s: a host that got its slot afterwards has written by now
    assert proc.returncode == 99, out
    assert log.read_text().count("start") == 1, log.read_text()


def test_a_task_timeout_counts_from_the_hosts_turn_too(sshd: PrivateSSHD, tmp_path: Path) -> None:
    """A task with `timeout: 4` on four hosts that start one at a time, 1.5 s each: the last
    waits ~5 s for its turn, and still only its own start and request count against its 4 s."""
    log = tmp_path / "starts.log"
    args = _probe_play(sshd, tmp_path, 4, _slow_wrapper(tmp_path, log, 1.5), {"timeout": 4})
    res = cli("play", *args, "--connect-slots", "1", "--no-history", cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    assert res.out.count("ok=1") == 4, res.out
    assert _most_at_once(log) == 1, log.read_text()
