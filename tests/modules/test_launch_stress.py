"""launch_detached under load: a job that exits within milliseconds is reported with its exit
status, never as "not running in its own session" (the agent's launch op, called directly).

The op forks each job's supervisor from this (pytest's) process, as it does from the agent;
the agent reaps them, so here the test does: by the pids the launch records name, never
another child of pytest's."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from opsrunner.remote.jobfiles import pidfile_paths
from opsrunner.remote.launch import op_launch

#: How long the supervisors of jobs that already exited get to exit in turn.
REAP_S = 30.0


def _supervisor(pidfile: str) -> int | None:
    """The pid of the supervisor the last launch of `pidfile` forked (its launch record's)."""
    with contextlib.suppress(OSError, ValueError, TypeError, IndexError):
        return int(json.loads(Path(pidfile_paths(pidfile)["meta"]).read_text())["supervisor"][0])
    return None


def _reap(pids: set[int]) -> None:
    """Wait up to REAP_S for each of these children of this process to exit, and reap it (one
    the launch already reaped is no child any more)."""
    deadline = time.monotonic() + REAP_S
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue  # still running
            except ChildProcessError:
                pass
            pids.discard(pid)
        if pids:
            time.sleep(0.02)


def test_200_instant_exits_under_load_are_all_reported_with_their_status(tmp_path: Path) -> None:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    wrong, statuses, supervisors = [], [], set()
    try:
        for i in range(200):
            pidfile = str(tmp_path / f"j{i % 5}.pid")
            reply = op_launch({"argv": ["true"], "pidfile": pidfile, "log": str(tmp_path / "j.log")})
            supervisor = _supervisor(pidfile)
            if supervisor is not None:
                supervisors.add(supervisor)
            if "error" in reply or "exited" not in reply:
                wrong.append(reply)
            else:
                statuses.append(reply["exited"].get("returncode"))
    finally:
        for p in burners:
            p.kill()
            p.wait()
        _reap(supervisors)  # one still running then is the process guard's leftover, named there
    assert wrong == []
    assert statuses == [0] * 200
