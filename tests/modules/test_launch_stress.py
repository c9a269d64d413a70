"""launch_detached under load: a job that exits within milliseconds is reported with its exit
status, never as "not running in its own session" (the agent's launch op, called directly)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from opsrunner.remote.launch import op_launch


def test_200_instant_exits_under_load_are_all_reported_with_their_status(tmp_path: Path) -> None:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    wrong, statuses = [], []
    try:
        for i in range(200):
            pidfile = str(tmp_path / f"j{i % 5}.pid")
            reply = op_launch({"argv": ["true"], "pidfile": pidfile, "log": str(tmp_path / "j.log")})
            if "error" in reply or "exited" not in reply:
                wrong.append(reply)
            else:
                statuses.append(reply["exited"].get("returncode"))
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert wrong == []
    assert statuses == [0] * 200
