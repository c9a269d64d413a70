"""A launched job starts with every signal at its default action, however the controller was
started: `nohup opsrunner play ... &` (as scripts and some schedulers start it) leaves SIGHUP,
SIGINT and SIGQUIT ignored in the controller, and an ignored signal survives fork and exec
into the agent, a wrapper, the supervisor and the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, kill_marked, marked_host, sleep_marker, wait_for, write_inventory

BACKGROUND_IGNORED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)


def _as_a_background_shell_starts_it() -> None:
    for number in BACKGROUND_IGNORED:
        signal.signal(number, signal.SIG_IGN)


def _masks(log: Path) -> dict[str, int]:
    fields = dict(line.split(":\t", 1) for line in log.read_text().splitlines() if ":\t" in line)
    return {k: int(fields[k], 16) for k in ("SigIgn", "SigBlk")}


@pytest.mark.parametrize("transport", ["local", "ssh+nohup-wrapper"])
def test_a_job_launched_by_a_controller_started_from_a_background_shell_has_default_dispositions(
        transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    token = sleep_marker()
    host: dict[str, Any] = {"connection": "local"}
    if transport != "local":
        # A wrapper layer that ignores SIGHUP itself, as `nohup` does before it execs.
        host = request.getfixturevalue("sshd").host_vars(wrapper=["nohup"])
    host = marked_host(host, tmp_path / f"m{token}", sys.executable)
    log = tmp_path / "signals.log"
    inv = write_inventory(tmp_path / "inv.yml", {"target": host})
    pb = tmp_path / "pb.yml"
    pb.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [{
        "name": "launch", "timeout": 60, "launch_detached": {
            "argv": ["sh", "-c", f"grep '^Sig' /proc/self/status; exec sleep {token}"],
            "log": str(log), "pidfile": str(tmp_path / "signals.pid")}}]}]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    controller = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(inv)],
                                  cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, preexec_fn=_as_a_background_shell_starts_it)
    try:
        out, _ = controller.communicate(timeout=120)
        assert controller.returncode == 0, out
        assert wait_for(lambda: "SigBlk" in log.read_text(), 10)
        masks = _masks(log)
        assert masks["SigIgn"] == 0, masks  # nothing ignored, as a login shell starts a job
        assert masks["SigBlk"] == 0, masks
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_marked(token)


def test_the_controller_itself_did_inherit_the_ignored_signals(tmp_path: Path) -> None:
    """The premise of the test above holds: the controller started that way ignores them."""
    probe = subprocess.run([sys.executable, "-c", "import sys; print(open('/proc/self/status').read())"],
                           capture_output=True, text=True, preexec_fn=_as_a_background_shell_starts_it, timeout=30)
    ignored = int(next(ln for ln in probe.stdout.splitlines() if ln.startswith("SigIgn")).split()[1], 16)
    for number in BACKGROUND_IGNORED:
        assert ignored & (1 << (number - 1)), hex(ignored)
