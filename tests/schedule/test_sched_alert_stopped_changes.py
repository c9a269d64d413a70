"""A scheduled run stopped part way (SIGTERM to its process group) is alerted with what it
changed on each host before it stopped: the shipped restart stopped while it verifies says
that it killed the old job and launched a new one that nothing verified and no rollback
replaced; a run stopped before anything changed says that nothing did."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.alerts import Alerts
from tests.conftest import ROOT, sleep_marker, wait_for, write_inventory, write_yaml
from tests.helpers import ProjectEnv, opsrunner_process


def _alive(pid: int, marker: str) -> bool:
    """Whether `pid` is still the test's own job (its command line carries `marker`), not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return stat != "Z" and marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False


def _stop(pid: int | None, marker: str) -> None:
    if pid is not None and _alive(pid, marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not _alive(pid, marker), 5)


@pytest.fixture
def old_job(env: ProjectEnv) -> Iterator[tuple[int, str]]:
    """A job started by other means than the role (the old run kill_old finds by its pattern);
    a `sleep` of a unique length, left to init by its shell; stopped by pid if still running."""
    marker = sleep_marker()
    pid = int(subprocess.run(["sh", "-c", f"sleep {marker} >/dev/null 2>&1 & echo $!"], capture_output=True,
                             text=True, check=True).stdout)
    yield pid, marker
    _stop(pid, marker)


def _restart_project(env: ProjectEnv, old_marker: str, new_marker: str) -> None:
    """The shipped restart_training.yml and its role, on this machine under the test's root; the
    job is a `sleep` that writes no log, so its verify keeps polling until the run is stopped."""
    (env.project / "roles").symlink_to(ROOT / "roles")
    shutil.copy(ROOT / "playbooks" / "restart_training.yml", env.project)
    demo = env.root / "demo"
    write_yaml(demo / "src" / "train.py", "print('hi')\n")
    write_yaml(demo / "cache" / "kernel.bin", "compiled\n")
    write_inventory(env.project / "inv.yml", {"box": {"connection": "local"}}, groups={"trainers": ["box"]},
                    all_vars={"code_src": str(demo / "src"), "code_dest": str(demo / "code"),
                              "cache_paths": [str(demo / "cache")], "pidfile": str(demo / "train.pid"),
                              "log_path": str(demo / "train.log"), "kill_pattern": old_marker.replace(".", r"\."),
                              "kill_grace": 2, "wait_gpu_free": 0, "train_command": f"sleep {new_marker}",
                              "log_grows_within": 0, "verify_within": 60, "verify_stable_for": 10})


def _stopped_run(env: ProjectEnv, alerts: Alerts, playbook: str, when: Callable[[str], bool]) -> str:
    """`schedule run` in a session of its own, SIGTERM to its process group once `when` holds
    of its output; the alert's text."""
    added = env.run("schedule", "add", "nightly", playbook, "-i", "inv.yml", "--every", "1d",
                    "--notify", alerts.url)
    assert added.rc == 0, added.err
    output = env.root / "run.out"
    with output.open("w") as out, opsrunner_process("schedule", "run", "nightly", cwd=env.project, env=env.vars,
                                                    stdout=out, start_new_session=True) as proc:
        assert wait_for(lambda: when(output.read_text()), 60), output.read_text()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 143, output.read_text()
    assert wait_for(lambda: len(alerts.received) == 1, 10), alerts.received
    return str(alerts.received[0]["message"])


def test_a_restart_stopped_in_its_verify_alerts_the_kill_and_the_unverified_launch(
        env: ProjectEnv, alerts: Alerts, old_job: tuple[int, str]) -> None:
    old_pid, old_marker = old_job
    new_marker = sleep_marker()
    _restart_project(env, old_marker, new_marker)
    pidfile = env.root / "demo" / "train.pid"
    new_pid = None
    try:
        message = _stopped_run(env, alerts, "restart_training.yml", lambda out: "TASK [Verify" in out)
        new_pid = int(pidfile.read_text())
        # What the alert must tell: the old job is gone, the new one runs, unverified.
        assert not _alive(old_pid, old_marker) and _alive(new_pid, new_marker)
        lines = message.splitlines()
        assert "[box]" in lines, message
        assert any(ln.startswith(f"  changed: Stop the old run and confirm it is gone: killed 1: {old_pid} (")
                   for ln in lines), message
        assert any(ln.startswith("  changed: Launch the new run detached ") and f": launched pid {new_pid} " in ln
                   for ln in lines), message
        assert "  cut short: Verify the run is up (processes, log growing, no errors): interrupted (SIGTERM)" \
            in message, message
        assert "  LAUNCHED, NOT VERIFIED: what 'Launch the new run detached " in message, message
        assert "no verify passed after it; no rollback ran" in message, message
    finally:
        if new_pid is None and pidfile.exists():
            with contextlib.suppress(ValueError):
                new_pid = int(pidfile.read_text())
        _stop(new_pid, new_marker)


def test_a_run_stopped_before_anything_changed_says_nothing_changed(env: ProjectEnv, alerts: Alerts) -> None:
    started = env.root / "started"
    write_yaml(env.project / "slow.yml", [{"hosts": "all", "tasks": [
        {"name": "Look at the data", "stat": {"path": str(env.root)}},
        {"name": "Wait for the data", "shell": f"touch {started}; sleep 60"}]}])
    write_yaml(env.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    message = _stopped_run(env, alerts, "slow.yml", lambda _: started.exists())
    assert "what the run changed before it stopped (the hosts are left so):\n[node1]\n" \
           "  nothing: no task had ended changed on node1\n" \
           "  cut short: Wait for the data: interrupted (SIGTERM) while it ran on node1" in message, message
    assert "  changed: " not in message and "NOT VERIFIED" not in message, message
