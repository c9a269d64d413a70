"""The field notes' incidents as end-to-end regressions: real playbooks run by the CLI over
ssh through hostile wrappers, with a stand-in trainer (a step line every 0.2 s, clean
exit on SIGTERM)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import FD_HOLDER, REAPER, ROOT, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli_subprocess, read_events, task_ends
from tests.sshd import PrivateSSHD

TRAINER = ROOT / "examples" / "demo_trainer" / "train.py"


def setup(tmp_path: Path, sshd: PrivateSSHD, wrapper: list[str], marker: str) -> tuple[Path, dict]:
    work = tmp_path / "workspace"
    work.mkdir()
    inv = write_inventory(tmp_path / "inv.yml", {"gpu-box": sshd.host_vars(wrapper=wrapper)})
    paths = {
        "log": str(work / "train_opt2.log"), "pidfile": str(work / "train.pid"),
        "cmd": f"{sys.executable} -u {TRAINER} --run-name {marker} --checkpoint {work}/ck.json "
               f"--cache-dir {work}/torchinductor_root",
        "cache": str(work / "torchinductor_root"),
    }
    return inv, paths


def play(tmp_path: Path, inv: Path, tasks: list[dict], name: str = "pb.yml") -> tuple[int, str, list[dict], float]:
    pb = write_yaml(tmp_path / name, yaml.safe_dump([{"hosts": "all", "tasks": tasks}], sort_keys=False))
    events = tmp_path / (name + ".jsonl")
    start = time.monotonic()
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events), timeout=120)
    return res.rc, res.out + res.err, read_events(events), time.monotonic() - start


def restart_tasks(p: dict, kill_pattern: str) -> list[dict]:
    return [
        {"name": "kill", "kill_old": {"pattern": kill_pattern, "grace": 5}, "timeout": 60},
        {"name": "cache", "clear_cache": {"paths": [p["cache"]]}, "timeout": 30},
        {"name": "launch", "launch_detached": {"command": p["cmd"], "log": p["log"], "pidfile": p["pidfile"]},
         "timeout": 30},
        {"name": "verify", "verify": {"pattern": p["cmd"].split()[2].replace(".", "\\.") + ".*" + p["cmd"].split()[4],
                                      "processes": 1, "log": p["log"], "log_grows": 1, "stable_for": 1},
         "timeout": 60},
    ]


def test_incident_1_kill_pattern_matching_its_own_shell(tmp_path: Path, sshd: PrivateSSHD,
                                                        cleanup_marker: str) -> None:
    """`pkill -9 -f python3` inside `bash -c '...python3...'` killed its own shell: the log was
    never created. Here the pattern matches the old job AND every opsrunner/shell/wrapper
    process carrying the kill, and the restart still completes."""
    inv, p = setup(tmp_path, sshd, [REAPER], cleanup_marker)
    rc, out, ev, _ = play(tmp_path, inv, restart_tasks(p, cleanup_marker), "first.yml")
    assert rc == 0, out
    old = pids_with(cleanup_marker)
    assert len(old) == 1
    # The target is this same machine, so the pattern may name only what is unique to the
    # remote side: the job's marker and the agent/shell/wrapper chain carrying the kill
    # (the login shell's command line holds the agent's source, so it matches too).
    self_matching = f"{cleanup_marker}|opsrunner-agent|opsrunner-watchdog|session_reaper"
    rc, out, ev, _ = play(tmp_path, inv, restart_tasks(p, self_matching), "second.yml")
    assert rc == 0, out
    kill = task_ends(ev, "kill")[0]
    assert old[0] in kill["data"]["pids"]
    assert [e["status"] for e in task_ends(ev)] == ["changed", "changed", "changed", "ok"]
    assert Path(p["log"]).exists()
    new = pids_with(cleanup_marker)
    assert len(new) == 1 and new != old


@pytest.mark.parametrize("wrapper", [[FD_HOLDER], [REAPER, FD_HOLDER]], ids=["fd_holder", "reaper+fd_holder"])
def test_incident_2_launch_neither_dies_nor_hangs(tmp_path: Path, sshd: PrivateSSHD, wrapper: list[str],
                                                  cleanup_marker: str) -> None:
    """Without the kill the naive launch worked but ssh hung until a timeout killed it.
    launch_detached returns at once, and the job is alive afterwards."""
    inv, p = setup(tmp_path, sshd, wrapper, cleanup_marker)
    launch = restart_tasks(p, cleanup_marker)[2]
    rc, out, ev, _elapsed = play(tmp_path, inv, [launch])
    assert rc == 0, out
    assert task_ends(ev, "launch")[0]["duration_s"] < 5
    time.sleep(5)
    rc, out, ev, _ = play(tmp_path, inv, [restart_tasks(p, cleanup_marker)[3]], "check.yml")
    assert rc == 0, out
    assert len(pids_with(cleanup_marker)) == 1


def test_incident_3_crashed_never_started_and_hung_are_told_apart(tmp_path: Path, sshd: PrivateSSHD,
                                                                  cleanup_marker: str) -> None:
    inv, p = setup(tmp_path, sshd, [REAPER, FD_HOLDER], cleanup_marker)
    check = {"name": "status", "verify": {"pidfile": p["pidfile"], "processes": 1, "log": p["log"],
                                          "log_grows": 1.5, "within": 3}, "timeout": 60}
    rc, out, ev, _ = play(tmp_path, inv, [check], "never.yml")
    assert rc == 2
    assert "diagnosis: never started: no pidfile at" in task_ends(ev)[0]["msg"]

    crash = dict(restart_tasks(p, cleanup_marker)[2])
    crash["launch_detached"] = {**crash["launch_detached"], "command": p["cmd"] + " --crash-after 3"}
    rc, out, ev, _ = play(tmp_path, inv, [crash], "crash.yml")
    assert rc == 0, out
    rc, out, ev, _ = play(tmp_path, inv, [check], "crashcheck.yml")
    msg = task_ends(ev)[0]["msg"]
    assert rc == 2
    assert "exited with code 1" in msg and "RuntimeError: simulated crash" in msg

    hang = dict(crash)
    hang["launch_detached"] = {**crash["launch_detached"], "command": p["cmd"] + " --hang-after 1"}
    rc, out, ev, _ = play(tmp_path, inv, [hang], "hang.yml")
    assert rc == 0, out
    time.sleep(2.5)  # longer than log_grows: one growth long ago no longer passes
    rc, out, ev, _ = play(tmp_path, inv, [check], "hangcheck.yml")
    assert rc == 2
    assert "diagnosis: hung: the job (pid" in task_ends(ev)[0]["msg"]
    assert "has not grown for" in task_ends(ev)[0]["msg"]
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 1, 2)
