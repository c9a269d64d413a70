"""The shipped role's verdicts as a user meets them: a hung restart fails, a dry run tells the
story of the real run (default inventory, and over ssh through the hostile wrappers)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.conftest import FD_HOLDER, REAPER, ROOT, kill_marked, pids_with, write_yaml
from tests.helpers import cli_subprocess
from tests.sshd import PrivateSSHD


def _ssh_inventory(tmp_path: Path, sshd: PrivateSSHD) -> tuple[Path, Path]:
    """The role over ssh through both hostile wrappers, with the role's own verify defaults."""
    demo = tmp_path / "remote-demo"
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"children": {"trainers": {
        "hosts": {"gpu-box": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])},
        "vars": {
            "code_src": str(ROOT / "examples" / "demo_trainer"), "code_dest": f"{demo}/code",
            "cache_paths": [f"{demo}/cache"], "pidfile": f"{demo}/train.pid", "log_path": f"{demo}/train.log",
            "kill_pattern": f"{demo}/code/train\\.py", "kill_grace": 10, "wait_gpu_free": 0,
            "train_command": f"{sys.executable} -u {demo}/code/train.py --checkpoint {demo}/ck.json",
        }}}}})
    return inv, demo


def test_hung_restart_fails_with_the_role_defaults_over_ssh(tmp_path: Path, sshd: PrivateSSHD) -> None:
    inv, demo = _ssh_inventory(tmp_path, sshd)
    try:
        res = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-e", "train_extra_args=--hang-after=2")
        assert res.rc == 2, res.out
        assert "diagnosis: hung: the job (pid" in res.out and "has not grown for" in res.out
        assert "log_grows: expected grows within every 5s, got last grew" in res.out
    finally:
        kill_marked(str(demo))


def test_hung_restart_fails_on_the_default_inventory(home: Path) -> None:
    res = cli_subprocess("play", "restart_training.yml", "-e", "train_extra_args=--hang-after=2",
                         env={"HOME": str(home)})
    assert res.rc == 2, res.out
    assert "diagnosis: hung: the job (pid" in res.out


def test_dry_run_on_a_running_job_tells_the_real_story(home: Path) -> None:
    env = {"HOME": str(home)}
    assert cli_subprocess("play", "restart_training.yml", env=env).rc == 0
    (job,) = pids_with(f"{home}/opsrunner-demo/code/train.py")
    dry = cli_subprocess("play", "restart_training.yml", "-C", "-v", env=env)
    assert dry.rc == 0, dry.out
    assert f"would kill 1: {job} (" in dry.out
    assert re.search(rf"would launch \(after stopping pid {job}\): python3 -u {home}/opsrunner-demo", dry.out)
    assert "already running" not in dry.out
    assert "skipped in check mode: an earlier task would launch the job on this host" in dry.out
    assert pids_with(f"{home}/opsrunner-demo/code/train.py") == [job]
    typo = cli_subprocess("play", "restart_training.yml", "-C", "-e", "train_command=/path/trian.py", env=env)
    assert typo.rc == 2
    assert "program /path/trian.py not found on the target" in typo.out
    assert pids_with(f"{home}/opsrunner-demo/code/train.py") == [job]


def test_dry_run_over_ssh_checks_the_program(tmp_path: Path, sshd: PrivateSSHD) -> None:
    inv, demo = _ssh_inventory(tmp_path, sshd)
    dry = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-C")
    assert dry.rc == 0, dry.out
    assert f"would launch: {sys.executable} -u {demo}/code/train.py" in dry.out
    typo = cli_subprocess("play", "restart_training.yml", "-i", str(inv), "-C", "-e",
                          "train_command=/no/such/dir/trian.py")
    assert typo.rc == 2 and "program /no/such/dir/trian.py not found on the target" in typo.out
    assert not demo.exists()


def test_status_reports_pid_uptime_log_and_last_line(home: Path, tmp_path: Path) -> None:
    env = {"HOME": str(home)}
    assert cli_subprocess("play", "restart_training.yml", env=env).rc == 0
    (job,) = pids_with(f"{home}/opsrunner-demo/code/train.py")
    events = tmp_path / "status.jsonl"
    res = cli_subprocess("play", "status.yml", "--json-events", str(events), env=env)
    assert res.rc == 0, res.out
    assert re.search(rf"running, pid {job}, up \d+\.\ds, log \d+ bytes, last grew \d+\.\ds ago; "
                     r"last line: step \d+ ", res.out), res.out
    import json

    (end,) = [json.loads(ln) for ln in events.read_text().splitlines() if '"task_end"' in ln]
    data = end["data"]
    assert data["state"] == "running" and data["pid"] == job
    assert data["uptime_s"] > 0 and data["log_size"] > 0 and 0 <= data["log_age_s"] < 2
    assert data["last_line"].startswith("step ") and data["gpu_memory_mb"] is None  # no nvidia-smi here
