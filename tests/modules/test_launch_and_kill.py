"""launch_detached and kill_old over local, ssh, and ssh through the hostile wrappers."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.conftest import marked_host, pids_with, wait_for
from tests.modules.conftest import Target


def launch_task(target: Target, marker: str, name: str = "launch", **extra: object) -> dict:
    args = {"command": target.trainer_command(marker, target.work / "ck.json"),
            "log": str(target.work / "logs" / "train.log"), "pidfile": str(target.work / "train.pid")}
    args.update(extra)
    return {"name": name, "launch_detached": args, "timeout": 30}


def test_launched_job_survives_session_and_is_properly_detached(target: Target, cleanup_marker: str) -> None:
    start = time.monotonic()
    run = target.play([launch_task(target, cleanup_marker)])
    took = time.monotonic() - start
    assert run.rc == 0, run.out
    assert took < 5, f"the launch held the call for {took:.1f}s"
    end = run.end("launch")
    assert end["data"]["pid"] == int((target.work / "train.pid").read_text())
    pid = target.host_pid(target.work / "train.pid")  # this machine's pid for it (differs in a container)
    time.sleep(5)
    # Checked from a fresh connection (a new play), and from this machine's /proc.
    check = target.play([{"name": "verify", "verify": {"pidfile": str(target.work / "train.pid"),
                                                       "processes": 1, "log": str(target.work / "logs/train.log"),
                                                       "log_grows": 2}, "timeout": 30}])
    assert check.rc == 0, check.out
    assert pids_with(cleanup_marker) == [pid]
    assert os.getsid(pid) == pid  # its own session
    fds = sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    assert fds == [0, 1, 2], fds  # every inherited descriptor closed
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == str(target.work / "logs" / "train.log")
    supervisor = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    sup_cmdline = Path(f"/proc/{supervisor}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert sup_cmdline.startswith("opsrunner-supervisor")
    assert cleanup_marker not in sup_cmdline and "train.py" not in sup_cmdline
    # Exit status recorded next to the pidfile when the job ends.
    os.kill(pid, signal.SIGTERM)
    exit_file = target.work / "train.exit"
    assert wait_for(exit_file.exists, 10)
    assert json.loads(exit_file.read_text())["returncode"] == 0
    assert "SIGTERM: checkpoint saved" in (target.work / "logs" / "train.log").read_text()


def test_a_launched_job_has_the_default_signal_dispositions(target: Target, cleanup_marker: str) -> None:
    """The supervisor is a Python, which ignores SIGPIPE and SIGXFSZ: the job must not inherit
    that (a pipeline in it would get EPIPE errors instead of ending, a file over its size
    limit EFBIG instead of the signal)."""
    log = target.work / "signals.log"
    run = target.play([{"name": "launch", "launch_detached": {
        "argv": ["sh", "-c", f"grep '^Sig' /proc/self/status; exec sleep {cleanup_marker}"],
        "log": str(log), "pidfile": str(target.work / "signals.pid")}, "timeout": 30}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: "SigIgn" in log.read_text(), 10)
    masks = dict(line.split(":\t") for line in log.read_text().splitlines())
    assert int(masks["SigIgn"], 16) == 0, masks  # as a login shell would start it
    assert int(masks["SigBlk"], 16) == 0, masks


def test_launch_is_idempotent(target: Target, cleanup_marker: str) -> None:
    first = target.play([launch_task(target, cleanup_marker)])
    assert first.rc == 0, first.out
    second = target.play([launch_task(target, cleanup_marker)])
    assert second.rc == 0
    assert second.end("launch")["status"] == "ok"
    assert "already running" in second.end("launch")["msg"]
    assert len(pids_with(cleanup_marker)) == 1


def test_launch_failure_is_reported(target: Target) -> None:
    run = target.play([{"name": "launch", "launch_detached": {
        "argv": ["/nonexistent/trainer-binary"], "pidfile": str(target.work / "x.pid")}}])
    assert run.rc == 2
    assert run.end("launch")["msg"] == "program /nonexistent/trainer-binary not found on the target"


def test_kill_by_pidfile_takes_the_whole_tree(target: Target, cleanup_marker: str) -> None:
    cmd = (f"setsid sleep {cleanup_marker} & sleep {cleanup_marker} & "
           f"{target.python} -c 'import time; time.sleep(1000)' {cleanup_marker}; wait")
    run = target.play([{"name": "launch", "launch_detached": {"command": cmd, "pidfile": str(target.work / "j.pid")}}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 4, 5), pids_with(cleanup_marker)
    run = target.play([{"name": "kill", "kill_old": {"pidfile": str(target.work / "j.pid"), "grace": 2}}])
    assert run.rc == 0, run.out
    assert run.end("kill")["status"] == "changed"
    assert len(run.end("kill")["data"]["pids"]) == 4
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 3), pids_with(cleanup_marker)


def test_kill_escalates_to_sigkill_and_check_mode_kills_nothing(target: Target, cleanup_marker: str) -> None:
    stubborn = (f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"time.sleep(1000)  # {cleanup_marker}")
    run = target.play([{"name": "launch", "launch_detached": {"argv": [target.python, "-c", stubborn]}}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 1, 5)
    dry = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker, "grace": 1}}], "--check")
    assert dry.end("kill")["status"] == "changed" and "would kill 1" in dry.end("kill")["msg"]
    assert len(pids_with(cleanup_marker)) == 1
    run = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker, "grace": 1}}])
    assert run.rc == 0, run.out
    assert "SIGKILL needed for 1" in run.end("kill")["msg"]
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 3)
    again = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker}}])
    assert again.end("kill")["status"] == "ok"


def test_kill_pattern_matching_its_own_command_line_incident_1(target: Target, cleanup_marker: str) -> None:
    # The pattern also matches the agent's own command line, the shell and the wrapper
    # chain carrying it (the shape of `pkill -f python3` inside `bash -c '...python3...'`).
    run = target.play([launch_task(target, cleanup_marker)])
    assert run.rc == 0, run.out
    # The agent, its shell and the wrapper chain all name the marker (marked_host), so the
    # marker alone matches them and the job - and nothing that this test did not start.
    marked = Target(marked_host(target.host_vars, target.work / f"chain-{cleanup_marker}", target.python),
                    target.side)
    # How many of the task's ancestors name the chain folder (split in the script, so the
    # script's own text cannot count).
    ancestry = ("p=$$; while [ \"$p\" -gt 1 ]; do tr '\\0' ' ' < /proc/$p/cmdline; echo; "
                f"p=$(awk '{{print $4}}' /proc/$p/stat); done | grep -c 'chai''n-{cleanup_marker}'")
    run = marked.play([
        {"name": "ancestry", "shell": ancestry},
        {"name": "kill", "kill_old": {"pattern": cleanup_marker, "grace": 5}, "timeout": 60},
        {"name": "next", "shell": "echo still here"},
    ])
    assert run.rc == 0, run.out
    # The chain carrying a task names the marker: the pattern really matched the killer's side.
    assert int(run.end("ancestry")["stdout_tail"]) >= 1
    assert run.end("next")["stdout_tail"] == "still here"
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 3)


def test_a_process_carrying_an_agents_start_is_never_selected_wherever_it_names_it(target: Target,
                                                                                   cleanup_marker: str) -> None:
    """Another run's wrapper layer on the host (`python3 reaper.py -- python3 holder.py -- sh -c
    '...opsrunner-agent...'`) names the agent's start past its first 200 characters: a pattern
    that matches it must not select it (it was protected only where the marker came first,
    and another session's connection was cut). The job the pattern names is stopped."""
    sleeper = "import time; time.sleep(600)"
    layer = [target.python, "-c", sleeper, cleanup_marker, "--", "x" * 300, "# opsrunner-agent (cached)"]
    run = target.play([{"name": "job", "launch_detached": {"argv": [target.python, "-c", sleeper, cleanup_marker]}},
                       {"name": "layer", "launch_detached": {"argv": layer}}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 5)
    (kept,) = [pid for pid in pids_with(cleanup_marker)
               if "opsrunner-agent" in Path(f"/proc/{pid}/cmdline").read_text()]
    run = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker, "grace": 2}}])
    assert run.rc == 0, run.out
    assert len(run.end("kill")["data"]["pids"]) == 1, run.out
    assert wait_for(lambda: pids_with(cleanup_marker) == [kept], 5), pids_with(cleanup_marker)


def test_wait_gpu_free_with_fake_nvidia_smi(target: Target) -> None:
    bin_dir = target.work / "fakebin"
    bin_dir.mkdir()
    state = target.work / "gpu_state"
    fake = bin_dir / "nvidia-smi"
    # Prints the next line of the state file each call (index, MB used), like the real query.
    fake.write_text(f"#!/bin/sh\nn=$(cat {state}.n 2>/dev/null || echo 0); echo $((n+1)) > {state}.n\n"
                    f"sed -n \"$((n+1))p\" {state} | tr ';' '\\n'\n")
    fake.chmod(0o755)
    host_vars = dict(target.host_vars)
    chain = list(host_vars.get("wrapper") or [])
    host_vars["wrapper"] = [*chain, f"env PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin"]
    gpu_target = Target(host_vars, target.side)
    state.write_text("0, 30000;1, 20\n0, 12000;1, 20\n0, 300;1, 20\n")
    task = {"name": "kill", "kill_old": {"pattern": "no-such-process-xyz", "wait_gpu_free": 10}}
    run = gpu_target.play([task])
    assert run.rc == 0, run.out
    assert "GPU memory released" in run.end("kill")["msg"]
    state.write_text("0, 30000;1, 20\n" * 200)
    Path(f"{state}.n").unlink()
    run = gpu_target.play([{**task, "kill_old": {**task["kill_old"], "wait_gpu_free": 1}}])
    assert run.rc == 2
    assert "GPU memory still in use 1s after the kill (GPU 0: 30000 MB" in run.end("kill")["msg"]
    if any(Path(d, "nvidia-smi").exists() for d in ("/usr/bin", "/bin")):
        return  # a real nvidia-smi here: the "no nvidia-smi" case cannot be staged
    host_vars["wrapper"] = [*chain, "env PATH=/usr/bin:/bin"]
    run = Target(host_vars, target.side).play([{**task, "kill_old": {"pattern": "x-no-such", "wait_gpu_free": 5}}])
    assert run.rc == 0, run.out
    assert "no nvidia-smi on the target" in run.end("kill")["msg"]


def test_kill_user_filter(target: Target, cleanup_marker: str) -> None:
    run = target.play([{"name": "launch", "launch_detached": {"argv": ["sleep", cleanup_marker]}}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 1, 5)
    other = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker, "user": 65534}}])
    assert other.end("kill")["status"] == "ok"  # not that user's process: untouched
    assert len(pids_with(cleanup_marker)) == 1
    mine = target.play([{"name": "kill", "kill_old": {"pattern": cleanup_marker, "user": os.getuid()}}])
    assert mine.end("kill")["status"] == "changed"
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 3)
