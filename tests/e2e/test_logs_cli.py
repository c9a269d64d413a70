"""`opsrunner logs`: the latest run's last lines per host, and --follow until Ctrl-C, which
leaves nothing running on the host (local, and ssh through both hostile wrappers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRAINER, host_vars_for, kill_marked, wait_for, write_yaml
from tests.helpers import cli_subprocess, opsrunner_process


def _descendants(root: int) -> list[str]:
    """Command lines of every process below `root` (the test sshd) right now."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            todo.append(pid)
            with contextlib.suppress(OSError):
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


@pytest.mark.parametrize("transport", ["local", "ssh+reaper+fd_holder"])
def test_logs_tail_and_follow(transport: str, request: pytest.FixtureRequest, tmp_path: Path,
                              cleanup_marker: str) -> None:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    log, pidfile = tmp_path / "train.log", tmp_path / "train.pid"
    log.write_text("old run line\n" * 50)
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"children": {"trainers": {
        "hosts": {"box": host_vars_for(transport, server)},
        "vars": {"log_path": str(log), "pidfile": str(pidfile)}}}}})
    pb = write_yaml(tmp_path / "launch.yml", [{"hosts": "all", "tasks": [{"name": "l", "launch_detached": {
        "command": " ".join([sys.executable, "-u", str(TRAINER), "--run-name", cleanup_marker,
                             "--checkpoint", str(tmp_path / "ck.json"), "--step-time", "0.1"]),
        "log": str(log), "pidfile": str(pidfile)}}]}])
    try:
        launched = cli_subprocess("play", str(pb), "-i", str(inv))
        assert launched.rc == 0, launched.out
        time.sleep(1)
        tail = cli_subprocess("logs", "-i", str(inv), "-n", "3", cwd=ROOT)
        assert tail.rc == 0, tail.err
        lines = tail.out.splitlines()
        assert len(lines) == 3 and all(ln.startswith("box | step ") for ln in lines), tail.out
        everything = cli_subprocess("logs", "-i", str(inv), "-n", "1000", cwd=ROOT)
        assert "old run line" not in everything.out and "box | ready: training" in everything.out
        # Ended by pid when the block ends, pass or fail: started from a background shell it
        # inherits SIGINT ignored, and a Ctrl-C it never sees must not leave it following.
        with opsrunner_process("logs", "-i", str(inv), "-n", "0", "-f", stderr=subprocess.PIPE) as follow:
            seen = [follow.stdout.readline() for _ in range(5)] if follow.stdout else []
            assert all(s.startswith("box | step ") for s in seen), seen
            steps = [int(s.split()[3].rstrip(":")) for s in seen]
            assert steps == list(range(steps[0], steps[0] + 5))  # in order, nothing lost or repeated
            follow.send_signal(signal.SIGINT)
            assert follow.wait(10) == 0
        if server is not None:
            assert wait_for(lambda: not [c for c in _descendants(server.proc.pid) if "opsrunner" in c], 2)
    finally:
        kill_marked(cleanup_marker)
