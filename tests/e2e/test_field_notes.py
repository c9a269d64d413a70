"""The field notes' incidents as end-to-end regressions: real playbooks run by the CLI over
ssh through hostile wrappers, and through ssh + `lxc-attach` into the real LXC container
(what `pct exec` runs), with a stand-in trainer (a step line every 0.2 s, clean exit on
SIGTERM)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import (
    kill_marked,
    marked_host,
    pids_with,
    side_for,
    sleep_marker,
    vars_for,
    wait_for,
    write_inventory,
    write_yaml,
)
from tests.helpers import cli_subprocess, read_events, task_ends
from tests.lxc import TargetSide

LXC = pytest.mark.lxc


def setup(tmp_path: Path, request: pytest.FixtureRequest, transport: str,
          marker: str) -> tuple[Path, dict, TargetSide]:
    side = side_for(transport, request, tmp_path)
    work = side.work / "workspace"
    work.mkdir()
    inv = write_inventory(tmp_path / "inv.yml", {"gpu-box": vars_for(transport, request)})
    paths = {
        "log": str(work / "train_opt2.log"), "pidfile": str(work / "train.pid"),
        "cmd": f"{side.python} -u {side.trainer} --run-name {marker} --checkpoint {work}/ck.json "
               f"--cache-dir {work}/torchinductor_root",
        "cache": str(work / "torchinductor_root"),
    }
    return inv, paths, side


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


@pytest.mark.parametrize("transport", ["ssh+reaper", pytest.param("ssh+lxc-attach", marks=LXC)])
def test_incident_1_kill_pattern_matching_its_own_shell(tmp_path: Path, request: pytest.FixtureRequest,
                                                        transport: str, cleanup_marker: str) -> None:
    """`pkill -9 -f python3` inside `bash -c '...python3...'` killed its own shell: the log was
    never created. Here the pattern matches the old job AND every opsrunner/shell/wrapper
    process carrying the kill, and the restart still completes."""
    inv, p, side = setup(tmp_path, request, transport, cleanup_marker)
    rc, out, ev, _ = play(tmp_path, inv, restart_tasks(p, cleanup_marker), "first.yml")
    assert rc == 0, out
    old = pids_with(cleanup_marker)
    assert len(old) == 1
    old_on_target = side.target_pid(old[0])  # its pid as the target's kill reports it
    # The agent, its shell and the wrapper chain carrying the kill all name the marker
    # (marked_host), so the marker alone matches them and the old job - and nothing this test
    # did not start (the target is this same machine). In the container, lxc-attach and all
    # on the host side are out of the kill's sight.
    host = yaml.safe_load(inv.read_text())["all"]["hosts"]["gpu-box"]
    marked = marked_host(host, side.work / f"chain-{cleanup_marker}", side.python)
    inv = write_inventory(tmp_path / "marked.yml", {"gpu-box": marked})
    self_matching = cleanup_marker + ("|lxc-attach" if transport.endswith("lxc-attach") else "")
    rc, out, ev, _ = play(tmp_path, inv, restart_tasks(p, self_matching), "second.yml")
    assert rc == 0, out
    kill = task_ends(ev, "kill")[0]
    assert old_on_target in kill["data"]["pids"]
    assert [e["status"] for e in task_ends(ev)] == ["changed", "changed", "changed", "ok"]
    assert Path(p["log"]).exists()
    new = pids_with(cleanup_marker)
    assert len(new) == 1 and new != old


@pytest.mark.parametrize("transport,exec_mode", [("ssh+reaper", "auto"), ("ssh+reaper+fd_holder", "auto"),
                                                 ("ssh", "bare"), ("local", "bare"),
                                                 pytest.param("ssh+lxc-attach", "auto", marks=LXC)])
def test_incident_1_a_command_task_kill_spares_what_carries_it(tmp_path: Path, request: pytest.FixtureRequest,
                                                               transport: str, exec_mode: str) -> None:
    """`command: pkill -f PATTERN` as a task, where the command is a bare exec (behind a wrapper
    chain, or `command_exec: bare`) under a deadline: the watchdog and the wrappers around it
    must not carry the command's words, or the kill kills them and the task dies with them."""
    side = side_for(transport, request, tmp_path)
    marker = sleep_marker()
    try:
        inv = write_inventory(tmp_path / "inv.yml", {"gpu-box": {**vars_for(transport, request),
                                                                 "command_exec": exec_mode}})
        launch = {"name": "launch", "launch_detached": {"command": f"sleep {marker}", "log": str(side.work / "s.log"),
                                                        "pidfile": str(side.work / "s.pid")}}
        rc, out, _, _ = play(tmp_path, inv, [launch], "launch.yml")
        assert rc == 0, out
        assert len(pids_with(f"sleep {marker}")) == 1
        kill = {"name": "kill", "command": {"argv": ["pkill", "-f", f"sleep {marker}"]}, "timeout": 30}
        after = {"name": "after", "command": "true"}
        rc, out, ev, _ = play(tmp_path, inv, [kill, after])
        assert rc == 0, out
        assert [e["status"] for e in task_ends(ev)] == ["changed", "changed"]
        wait_for(lambda: pids_with(marker) == [], 10)
    finally:
        kill_marked(marker)


@pytest.mark.parametrize("transport", ["ssh+fd_holder", "ssh+reaper+fd_holder",
                                       pytest.param("ssh+lxc-attach", marks=LXC)])
def test_incident_2_launch_neither_dies_nor_hangs(tmp_path: Path, request: pytest.FixtureRequest, transport: str,
                                                  cleanup_marker: str) -> None:
    """Without the kill the naive launch worked but ssh hung until a timeout killed it.
    launch_detached returns at once, and the job is alive afterwards."""
    inv, p, _side = setup(tmp_path, request, transport, cleanup_marker)
    launch = restart_tasks(p, cleanup_marker)[2]
    rc, out, ev, _elapsed = play(tmp_path, inv, [launch])
    assert rc == 0, out
    assert task_ends(ev, "launch")[0]["duration_s"] < 5
    time.sleep(5)
    rc, out, ev, _ = play(tmp_path, inv, [restart_tasks(p, cleanup_marker)[3]], "check.yml")
    assert rc == 0, out
    assert len(pids_with(cleanup_marker)) == 1


@pytest.mark.parametrize("transport", ["ssh+reaper+fd_holder", pytest.param("ssh+lxc-attach", marks=LXC)])
def test_incident_3_crashed_never_started_and_hung_are_told_apart(tmp_path: Path, request: pytest.FixtureRequest,
                                                                  transport: str, cleanup_marker: str) -> None:
    inv, p, _side = setup(tmp_path, request, transport, cleanup_marker)
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
    assert wait_for(lambda: "hanging (simulated)" in Path(p["log"]).read_text(), 20)
    time.sleep(2)  # longer than log_grows: the last growth is now too long ago
    rc, out, ev, _ = play(tmp_path, inv, [check], "hangcheck.yml")
    assert rc == 2
    assert "diagnosis: hung: the job (pid" in task_ends(ev)[0]["msg"]
    assert "has not grown for" in task_ends(ev)[0]["msg"]
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 1, 2)
