"""The shipped product as a user meets it: the README's playbooks, the default inventory,
the same role over ssh through a hostile wrapper, and the example inventories."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, kill_marked, pids_with, side_for, vars_for, wait_for, write_yaml
from tests.helpers import cli_subprocess


def trainer_pids(home: Path) -> list[int]:
    return pids_with(f"{home}/opsrunner-demo/code/train.py")


def test_default_inventory_restart_status_stop(home: Path) -> None:
    env = {"HOME": str(home)}
    first = cli_subprocess("play", "restart_training.yml", env=env)
    assert first.rc == 0, first.out + first.err
    assert "PLAY RECAP" in first.out
    assert re.search(r"localhost\s+: ok=8\s+changed=2", first.out), first.out
    assert "deployed 2 of 2 files" in first.out and "launched pid" in first.out
    assert len(trainer_pids(home)) == 1
    time.sleep(2.5)  # let it log and checkpoint
    second = cli_subprocess("play", "restart_training.yml", env=env)
    assert second.rc == 0, second.out
    assert "2 files up to date" in second.out
    assert "killed 1:" in second.out and "removed 256.0 KiB" in second.out
    assert wait_for(lambda: len(trainer_pids(home)) == 1, 3)
    log = (home / "opsrunner-demo" / "train.log").read_text()
    starts = re.findall(r"ready: training demo started at step (\d+)", log)
    assert len(starts) == 2 and int(starts[1]) > 0  # resumed from its checkpoint
    assert "SIGTERM: checkpoint saved" in log
    status = cli_subprocess("play", "status.yml", env=env)
    assert status.rc == 0, status.out
    assert "all checks passed: processes=1" in status.out
    stop = cli_subprocess("play", "stop_training.yml", env=env)
    assert stop.rc == 0 and "killed 1:" in stop.out
    assert trainer_pids(home) == []
    after = cli_subprocess("play", "status.yml", env=env)
    assert after.rc == 2
    assert "exited with code 0" in after.out
    assert "SIGTERM: checkpoint saved" in after.out  # the log tail explains it


def test_releases_on_the_default_inventory_run_the_release(home: Path) -> None:
    """-e releases=true with the shipped inventory: the job runs from the release that
    `current` points to (its /proc cmdline says so), and a second deploy's restart kills it."""
    env = {"HOME": str(home)}
    demo = home / "opsrunner-demo"
    first = cli_subprocess("play", "restart_training.yml", "-e", "releases=true", env=env)
    assert first.rc == 0, first.out + first.err
    release = (demo / "code" / "current").resolve()
    assert release.parent == demo / "code" / "releases"
    [pid] = pids_with(f"{release}/train.py")
    assert f"release {release.name}" in first.out
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[2] == f"{release}/train.py".encode()
    second = cli_subprocess("play", "restart_training.yml", "-e", "releases=true", env=env)
    assert second.rc == 0, second.out
    assert f"killed 1: {pid}" in second.out and len(pids_with(f"{demo}/code/releases/")) == 1
    assert cli_subprocess("play", "stop_training.yml", "-e", "releases=true", env=env).rc == 0
    assert pids_with(f"{demo}/code/") == []


def test_crash_diagnosis_from_the_readme_tour(home: Path) -> None:
    env = {"HOME": str(home)}
    res = cli_subprocess("play", "restart_training.yml", "-e", "train_extra_args=--crash-after=3", env=env)
    assert res.rc == 2
    assert "diagnosis: the job (pid" in res.out and "exited with code 1" in res.out
    assert "RuntimeError: simulated crash" in res.out


def test_list_tasks_and_hosts_without_connecting() -> None:
    res = cli_subprocess("play", "restart_training.yml", "--list-tasks", "--list-hosts")
    assert res.rc == 0
    for tag in ("deploy", "stop", "cache", "start", "verify"):
        assert f"TAGS: [{tag}" in res.out or f", {tag}]" in res.out
    assert "training_restart : Launch the new run detached" in res.out
    assert "HOSTS (1):\n    localhost" in res.out


@pytest.mark.parametrize("transport", ["ssh+reaper+fd_holder", pytest.param("ssh+lxc-attach", marks=pytest.mark.lxc)])
def test_same_role_over_ssh_through_hostile_wrapper(tmp_path: Path, request: pytest.FixtureRequest,
                                                    transport: str) -> None:
    """The shipped role over ssh through the hostile wrappers, and into the real container."""
    side = side_for(transport, request, tmp_path)
    demo = side.work / "remote-demo"
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"children": {"trainers": {
        "hosts": {"gpu-box": vars_for(transport, request)},
        "vars": {
            "code_src": str(ROOT / "examples" / "demo_trainer"), "code_dest": f"{demo}/code",
            "cache_paths": [f"{demo}/cache"], "pidfile": f"{demo}/train.pid", "log_path": f"{demo}/train.log",
            "kill_pattern": f"{demo}/code/train\\.py", "kill_grace": 10,
            "train_command": f"{side.python} -u {demo}/code/train.py --checkpoint {demo}/ck.json "
                             f"--cache-dir {demo}/cache",
            "ready_regex": "ready: training", "log_grows_within": 2, "verify_within": 15,
            "verify_stable_for": 1,
        }}}}})
    try:
        for _ in range(2):
            res = cli_subprocess("play", "restart_training.yml", "-i", str(inv))
            assert res.rc == 0, res.out + res.err
            assert wait_for(lambda: len(pids_with(f"{demo}/code/train.py")) == 1, 3)
        assert "killed 1:" in res.out
        status = cli_subprocess("play", "status.yml", "-i", str(inv))
        assert status.rc == 0, status.out
    finally:
        kill_marked(str(demo))


@pytest.mark.parametrize("inventory", sorted(p.name for p in (ROOT / "inventory" / "examples").glob("*.yml")))
def test_example_inventories_pass_check(inventory: str) -> None:
    # The examples name a code_src on their user's machine: here it is the bundled trainer's.
    src = str(ROOT / "examples" / "demo_trainer")
    for playbook in ("restart_training.yml", "status.yml", "stop_training.yml"):
        res = cli_subprocess("check", playbook, "-i", f"inventory/examples/{inventory}", "-e", f"code_src={src}")
        assert res.rc == 0, res.err
        assert "OK" in res.out


def _readme_commands() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    main = next(b for b in blocks if "opsrunner play restart_training.yml" in b and "venv" in b)
    tests = next(b for b in blocks if "pytest" in b and "venv" in b)
    return main.strip(), tests.strip()


def test_readme_test_command_is_what_ci_runs() -> None:
    _, tests = _readme_commands()
    assert "\n" not in tests
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci


def test_readme_main_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    main, _ = _readme_commands()
    assert "\n" not in main
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    clone = tmp_path / "clone"
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin:" + str(Path(sys.executable).parent),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE", "PIP_CACHE_DIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    try:
        proc = subprocess.run(["bash", "-c", main], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "PLAY RECAP" in proc.stdout and "failed=0" in proc.stdout
    finally:
        kill_marked(str(home))


def test_check_mode_restart_changes_nothing(home: Path) -> None:
    res = cli_subprocess("play", "restart_training.yml", "--check", "--diff", env={"HOME": str(home)})
    assert res.rc == 0, res.out
    assert "would deploy 2 of 2 files" in res.out and "would launch:" in res.out
    assert not (home / "opsrunner-demo").exists()
    assert trainer_pids(home) == []
