"""verify's verdicts and launch_detached's diagnoses, over local and ssh through the hostile wrappers.

A hang is caught inside the stability window, a crash is reported within seconds of the exit
whatever `within` says, and each diagnosis names the real cause in exact words.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.conftest import pids_with, wait_for
from tests.modules.conftest import Target


def _launch(target: Target, command: str, log: str, pidfile: str, **extra: object):
    return target.play([{"name": "launch", "launch_detached": {"command": command, "log": log,
                                                               "pidfile": pidfile, **extra}}])


def _verify(target: Target, timeout: float = 120, **args: object):
    return target.play([{"name": "verify", "verify": args, "timeout": timeout}])


def _paths(target: Target) -> tuple[str, str]:
    return str(target.work / "t.log"), str(target.work / "t.pid")


def test_hung_job_fails_inside_the_stability_window(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    log, pid = _paths(target)
    cmd = target.trainer_command(cleanup_marker, target.work / "ck.json", "--hang-after", "5", "--step-time", "0.2")
    launched = _launch(target, cmd, log, pid)
    assert launched.rc == 0, launched.out
    job = int(Path(pid).read_text())
    try:
        # The log grows for ~1 s, then never again: one growth must not pass for good.
        run = _verify(target, pidfile=pid, processes=1, log=log, log_grows=2, within=30, stable_for=20)
        end = run.end("verify")
        assert run.rc == 2, run.out
        assert end["data"]["state"] == "hung"
        assert f"diagnosis: hung: the job (pid {job}) is running but its log {log} has not grown for " \
            in end["msg"]
        assert "log_grows: expected grows within every 2s, got last grew" in end["msg"]
        assert end["duration_s"] < 15, end["duration_s"]  # 1 s of output + the 2 s window, not 20 s
        assert "step 5: hanging (simulated)" in end["msg"]
    finally:
        os.kill(target.host_pid(Path(pid)), signal.SIGKILL)


def test_crash_is_reported_within_two_seconds_whatever_within_is(edge_target: Target,
                                                                 cleanup_marker: str) -> None:
    target = edge_target
    log, pid = _paths(target)
    cmd = target.trainer_command(cleanup_marker, target.work / "ck.json", "--crash-after", "15", "--step-time", "0.2")
    launched = _launch(target, cmd, log, pid)
    assert launched.rc == 0, launched.out
    # The ready line never comes, so only the job's end can stop verify before `within`.
    run = _verify(target, pidfile=pid, processes=1, log=log, log_regex="never printed", within=300)
    end = run.end("verify")
    record = json.loads((target.work / "t.exit").read_text())
    reported = next(e for e in run.events if e["event"] == "task_end")["time"]
    assert run.rc == 2
    assert reported - record["ended_at"] < 2.0 + 1.5, reported - record["ended_at"]  # T+2 s, plus slack for load
    assert end["data"]["state"] == "exited 1"
    assert f"diagnosis: the job (pid {record['pid']}) exited with code 1, " in end["msg"]
    assert "RuntimeError: simulated crash at step 15" in end["msg"]


def test_killed_by_signal_names_the_signal(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    log, pid = _paths(target)
    launched = _launch(target, target.trainer_command(cleanup_marker, target.work / "ck.json"), log, pid)
    assert launched.rc == 0, launched.out
    job = int(Path(pid).read_text())
    os.kill(target.host_pid(Path(pid)), signal.SIGSEGV)  # job: the pid as the target reports it
    run = _verify(target, pidfile=pid, processes=1, log=log, within=60)
    assert f"diagnosis: the job (pid {job}) was killed by signal 11 (SIGSEGV), " in run.end("verify")["msg"]
    assert run.end("verify")["data"]["state"] == "killed by SIGSEGV"
    assert run.end("verify")["duration_s"] < 10


def test_launch_diagnoses_name_the_real_cause(edge_target: Target) -> None:
    target = edge_target
    w = target.work
    _log, pid = _paths(target)
    (w / "afile").write_text("not a directory\n")
    (w / "notexec.py").write_text("print('x')\n")
    cases = {
        "log": ({"argv": ["true"], "log": str(w / "afile" / "train.log")},
                f"cannot open the log {w}/afile/train.log: directory {w}/afile is not a directory"),
        "chdir": ({"argv": ["true"], "chdir": str(w / "missing")}, f"chdir {w}/missing does not exist on the target"),
        "path": ({"argv": ["trian-no-such-program"], "env": {"PATH": "/usr/bin:/bin"}},
                 "program trian-no-such-program not found on the target (searched PATH=/usr/bin:/bin)"),
        "abs": ({"argv": [str(w / "trian.py")]}, f"program {w}/trian.py not found on the target"),
        "mode": ({"argv": [str(w / "notexec.py")]}, f"program {w}/notexec.py is not executable (mode 0644)"),
    }
    (w / "notexec.py").chmod(0o644)
    for name, (args, expected) in cases.items():
        for check in ((), ("--check",)):
            run = target.play([{"name": "launch", "launch_detached": {"pidfile": pid, **args}}], *check)
            got = run.end("launch")["msg"]
            assert (run.rc, got) == (2, expected), (name, check)


def test_failed_launch_keeps_the_record_and_old_output_out_of_the_verdict(edge_target: Target) -> None:
    target = edge_target
    w = target.work
    log, pid = _paths(target)
    old = "echo 'Traceback (most recent call last): old run'; exit 3"
    assert _launch(target, old, log, pid).rc == 2  # exits at once with code 3
    assert "Traceback" in Path(log).read_text()
    run = target.play([{"name": "launch", "launch_detached": {"argv": ["trian-missing"], "log": log,
                                                              "pidfile": pid}}])
    assert run.end("launch")["msg"].startswith("program trian-missing not found on the target (searched PATH=")
    record = json.loads((w / "t.launch.json").read_text())
    assert record["pid"] is None and record["error"].startswith("program trian-missing not found")
    assert record["log_offset"] == Path(log).stat().st_size and not Path(pid).exists()
    status = _verify(target, pidfile=pid, processes=1, log=log, log_not_regex="Traceback", within=30)
    msg = status.end("verify")["msg"]
    assert "diagnosis: never started: the launch at " in msg and " failed: program trian-missing not found" in msg
    checks = {c[0]: c for c in status.end("verify")["data"]["checks"]}
    assert checks["log_not_regex"][1:] == [True, "log free of /Traceback/", "absent"]  # only this run's part
    assert "old run" not in msg
    assert status.end("verify")["duration_s"] < 10  # final at once, not after within=30


def test_shell_builtin_command_runs_under_sh_and_the_pidfile_names_the_job(edge_target: Target,
                                                                         cleanup_marker: str) -> None:
    target = edge_target
    log, pid = _paths(target)
    run = _launch(target, f"exec sleep {cleanup_marker}", log, pid, chdir=str(target.work))
    assert run.rc == 0, run.out
    job = target.host_pid(Path(pid))
    assert Path(f"/proc/{job}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", cleanup_marker.encode()]
    ulimit = _launch(target, f"ulimit -n 256; cd {target.work} && exec sleep {cleanup_marker}", log,
                     str(target.work / "u.pid"))
    assert ulimit.rc == 0, ulimit.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 5)


def test_job_that_exits_at_once_is_reported_with_its_status(edge_target: Target) -> None:
    target = edge_target
    log, pid = _paths(target)
    ok = target.play([{"name": "launch", "launch_detached": {"argv": ["true"], "log": log, "pidfile": pid}}])
    assert ok.rc == 0
    assert ok.end("launch")["msg"].endswith("; it exited at once with code 0")
    bad = target.play([{"name": "launch", "launch_detached": {"command": "echo boom; exit 7", "log": log,
                                                              "pidfile": pid}}])
    assert bad.rc == 2
    assert "; it exited at once with code 7" in bad.end("launch")["msg"] and "  | boom" in bad.end("launch")["msg"]


def test_unwritable_pidfile_starts_nothing(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    (target.work / "file").write_text("x")
    pid = str(target.work / "file" / "j.pid")
    run = target.play([{"name": "launch", "launch_detached": {"command": f"sleep {cleanup_marker}",
                                                              "pidfile": pid}}])
    assert run.rc == 2
    assert run.end("launch")["msg"].startswith(f"cannot write the pidfile {pid}: ")
    assert run.end("launch")["msg"].endswith("; the job was not started")
    time.sleep(0.5)
    assert pids_with(cleanup_marker) == []


def test_non_regular_files_are_refused_without_hanging(edge_target: Target) -> None:
    target = edge_target
    w = target.work
    fifo = w / "fifo"
    os.mkfifo(fifo)
    cases = [
        ({"name": "v", "verify": {"log": str(fifo), "log_regex": "x", "within": 1}},
         f"log {fifo} is a FIFO, not a regular file: refusing to use it"),
        ({"name": "v", "verify": {"log": "/dev/full", "log_regex": "x"}},
         "log /dev/full is a character device, not a regular file: refusing to use it"),
        ({"name": "v", "verify": {"pidfile": str(fifo), "processes": 1}},
         f"pidfile {fifo} is a FIFO, not a regular file: refusing to use it"),
        ({"name": "v", "kill_old": {"pidfile": str(fifo)}},
         f"pidfile {fifo} is a FIFO, not a regular file: refusing to use it"),
        ({"name": "v", "launch_detached": {"argv": ["true"], "log": str(fifo)}},
         f"log {fifo} is a FIFO, not a regular file: refusing to use it"),
        ({"name": "v", "launch_detached": {"argv": ["true"], "pidfile": str(w / "p.pid")}}, None),
    ]
    (w / "p.exit").mkdir()
    cases[-1] = (cases[-1][0], f"exit file {w}/p.exit is a directory, not a regular file: refusing to use it")
    for task, expected in cases:
        started = time.monotonic()
        run = target.play([task])  # no task timeout: nothing may block
        assert (run.rc, run.end("v")["msg"]) == (2, expected)
        assert time.monotonic() - started < 20


def test_verify_honours_the_task_timeout(edge_target: Target) -> None:
    target = edge_target
    log, _ = _paths(target)
    Path(log).write_text("started\n")
    # The first task opens the connection, so the timed task measures verify itself.
    run = target.play([{"name": "warm", "verify": {"log": log}},
                       {"name": "verify", "verify": {"log": log, "log_regex": "never printed", "within": 15},
                        "timeout": 3}])
    end = run.end("verify")
    assert end["status"] == "timed_out"
    assert end["duration_s"] < 4.5, end["duration_s"]
    assert end["msg"].startswith("verify stopped at the task timeout (3s) after ")
    assert "log_regex: expected log matches /never printed/, got no match" in end["msg"]


def test_a_running_job_whose_log_does_not_exist_has_no_log_not_a_hang(edge_target: Target,
                                                                        cleanup_marker: str) -> None:
    target = edge_target
    log, pid = _paths(target)
    launched = _launch(target, f"sleep {cleanup_marker}", log, pid)  # writes nothing to its log
    assert launched.rc == 0, launched.out
    job = int(Path(pid).read_text())
    elsewhere = str(target.work / "elsewhere.log")  # a log the job never wrote
    run = _verify(target, pidfile=pid, processes=1, log=elsewhere, log_min_bytes=1, log_grows=1, within=2)
    end = run.end("verify")
    assert run.rc == 2, run.out
    assert end["data"]["state"] == "no log"
    assert (f"diagnosis: no log at {elsewhere}: the job (pid {job}) is running but its log was never written "
            "(there is no such file)\n") in end["msg"]
    assert "log_min_bytes: expected >= 1 bytes, got no log" in end["msg"]
    assert "log_grows: expected grows within every 1s, got no log" in end["msg"]
    assert "hung" not in end["msg"] and "0 bytes" not in end["msg"]
    # The launch's own log exists and stays empty: that is a hang, at 0 bytes.
    run = _verify(target, pidfile=pid, processes=1, log=log, log_min_bytes=0, log_grows=1, within=2)
    end = run.end("verify")
    assert run.rc == 2, run.out
    assert end["data"]["state"] == "hung"
    assert (f"diagnosis: hung: the job (pid {job}) is running but its log {log} has not grown since the launch "
            "(0 bytes); log_grows allows 1s") in end["msg"]
