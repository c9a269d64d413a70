"""kill_old and launch_detached take the job's lock themselves where the play took none.

Two restarts of the same job at once, from a playbook with no job_lock task, end with exactly
one job: the loser fails with who holds the lock. A verify that only reads never waits for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, kill_marked, marked_host, pids_with, sleep_marker, write_inventory


def _restart_playbook(path: Path, work: Path, token: str, pause: float) -> Path:
    pidfile = str(work / "job.pid")
    tasks: list[dict[str, Any]] = [
        {"name": "stop", "kill_old": {"pidfile": pidfile, "grace": 2}},
        # Wide enough that two runs started together are both past the kill before either launches.
        {"name": "between", "command": f"sleep {pause}"},
        {"name": "start", "launch_detached": {"argv": ["sleep", token], "pidfile": pidfile,
                                              "log": str(work / "job.log")}},
    ]
    path.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}]))
    return path


def _start(pb: Path, inv: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(inv), "--no-color"],
                            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=120)
            results.append((p.returncode, out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_two_restarts_at_once_without_a_job_lock_task_end_with_one_job(
        transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    token = sleep_marker()
    host: dict[str, Any] = {"connection": "local"} if transport == "local" \
        else request.getfixturevalue("sshd").host_vars()
    inv = write_inventory(tmp_path / "inv.yml", {"target": marked_host(host, tmp_path / f"m{token}", sys.executable)})
    pb = _restart_playbook(tmp_path / "restart.yml", tmp_path, token, pause=1.5)
    try:
        results = _finish([_start(pb, inv, tmp_path), _start(pb, inv, tmp_path)])
        codes = sorted(rc for rc, _ in results)
        assert codes == [0, 2], results
        loser = next(out for rc, out in results if rc == 2)
        assert "locked by " in loser, loser
        assert "another run is restarting this job" in loser, loser
        assert len(pids_with(token)) == 1  # exactly one job
        winner = next(out for rc, out in results if rc == 0)
        assert "taken for this job, as no job_lock task did" in winner, winner
    finally:
        kill_marked(token)


def test_a_read_only_verify_never_waits_for_the_lock(tmp_path: Path) -> None:
    token = sleep_marker()
    inv = write_inventory(tmp_path / "inv.yml", {"target": {"connection": "local"}})
    pb = _restart_playbook(tmp_path / "restart.yml", tmp_path, token, pause=0.1)
    hold = tmp_path / "hold.yml"  # launches, then keeps the run (and its lock) alive for 20 s
    data = yaml.safe_load(pb.read_text())
    data[0]["tasks"].append({"name": "linger", "command": "sleep 20"})
    hold.write_text(yaml.safe_dump(data))
    status = tmp_path / "status.yml"
    status.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "check", "verify": {"pidfile": str(tmp_path / "job.pid"), "processes": 1}}]}]))
    holder = _start(hold, inv, tmp_path)
    try:
        pidfile = tmp_path / "job.pid"

        def launched() -> bool:  # the job runs and its pidfile names it: the holder is past its launch
            text = pidfile.read_text().split() if pidfile.exists() else []
            return bool(text) and int(text[0]) in pids_with(token)

        deadline = time.monotonic() + 60
        while not launched() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert launched(), "the holding run never launched its job"
        started = time.monotonic()
        (rc, out), = _finish([_start(status, inv, tmp_path)])
        assert rc == 0, out
        assert holder.poll() is None  # the lock was held all along
        assert time.monotonic() - started < 15, out  # far below the holder's 20 s: it did not wait
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            holder.communicate(timeout=30)
        kill_marked(token)
