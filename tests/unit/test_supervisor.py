"""The job supervisor (remote/supervisor.py) run as launch runs it: a fresh Python with only its
source, the spec marshalled in its environment. Real jobs, started here, waited for by pid."""

from __future__ import annotations

import binascii
import json
import marshal
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from opsrunner.remote import supervisor
from opsrunner.remote.launch import SUPERVISOR_BOOT as BOOT
from opsrunner.remote.launch import supervisor_code
from opsrunner.remote.watchdog import PR_SET_CHILD_SUBREAPER, load_prctl
from tests.conftest import pids_with, sleep_marker, wait_for

#: A job that daemonizes `sleep MARKER` (fork, setsid, fork: the helper leaves the job's tree),
#: waits for its middle process, then runs `sh -c TAIL`.
DAEMONIZE = ("import os, sys\n"
             "if os.fork() == 0:\n"
             "    os.setsid()\n"
             "    if os.fork() == 0:\n"
             "        os.execvp('sleep', ['sleep', sys.argv[1]])\n"
             "    os._exit(0)\n"
             "os.wait()\n"
             "os.execvp('sh', ['sh', '-c', sys.argv[2]])\n")


def _start(tmp_path: Path, argv: list[str], **spec: object) -> tuple[subprocess.Popen[bytes], list[str]]:
    """Start the supervisor over argv as launch starts it (a child subreaper); (it, handshake lines)."""
    r, w = os.pipe()
    full = {"argv": argv, "log": str(tmp_path / "job.log"), "exit_file": str(tmp_path / "job.exit"),
            "handshake_fd": w, **spec}
    env = dict(os.environ, OPSRUNNER_SPEC=binascii.b2a_base64(marshal.dumps(full), newline=False).decode(),
               OPSRUNNER_SUPERVISOR_CODE=supervisor_code())
    prctl = load_prctl()
    assert prctl is not None
    sup = subprocess.Popen([sys.executable, "-S", "-c", BOOT], env=env, pass_fds=(w,),
                           preexec_fn=lambda: prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
    os.close(w)
    with os.fdopen(r, "rb") as handshake:
        lines = handshake.read().decode().splitlines()
    return sup, lines


def _supervise(tmp_path: Path, argv: list[str], **spec: object) -> tuple[list[str], dict[str, object]]:
    """Run the supervisor over argv; (handshake lines, exit record)."""
    sup, lines = _start(tmp_path, argv, **spec)
    assert sup.wait(timeout=60) == 0
    return lines, json.loads((tmp_path / "job.exit").read_text())


def _helper(marker: str) -> int:
    """The pid of the daemonized `sleep MARKER`, once it runs."""
    def found() -> list[int]:
        return [pid for pid in pids_with(marker) if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0")]
    assert wait_for(lambda: len(found()) == 1, 10), pids_with(marker)
    return found()[0]


def _children(pid: int) -> dict[int, str]:
    """{pid: state} of pid's children (zombies too)."""
    found = {}
    for name in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found[int(name)] = fields[0]
    return found


def test_records_the_exit_code_and_the_jobs_start(tmp_path: Path) -> None:
    lines, record = _supervise(tmp_path, ["sh", "-c", "echo out; exit 3"])
    assert lines[0].startswith("ok ")
    assert record["pid"] == int(lines[0].split()[1])
    assert record["returncode"] == 3 and record["signal"] is None
    assert isinstance(record["start"], int) and isinstance(record["ended_at"], float)
    assert (tmp_path / "job.log").read_text() == "out\n"


def test_records_the_signal_that_killed_the_job(tmp_path: Path) -> None:
    _, record = _supervise(tmp_path, ["sh", "-c", "kill -KILL $$"])
    assert record["signal"] == signal.SIGKILL and record["returncode"] is None
    if supervisor.oom_kill_count() is not None:  # the same cgroup as this test: is its count readable?
        assert record["oom_kills"] == 0  # killed, but not by the OOM killer


def test_reports_a_job_that_cannot_start(tmp_path: Path) -> None:
    lines, record = _supervise(tmp_path, ["opsrunner-test-no-such-program"], chdir=str(tmp_path))
    assert any(line.startswith("err exec opsrunner-test-no-such-program:") for line in lines), lines
    assert record["returncode"] == 127


def test_the_job_gets_the_spec_env_and_none_of_opsrunners(tmp_path: Path) -> None:
    _supervise(tmp_path, ["sh", "-c", 'echo "$JOB_VAR/${OPSRUNNER_SPEC:-unset}"'], env={"JOB_VAR": "set"})
    assert (tmp_path / "job.log").read_text() == "set/unset\n"


def test_a_large_job_environment_fits(tmp_path: Path) -> None:
    """70 KB of the job's env: an environment string holds 128 KiB, so the spec's encoding counts."""
    big = "x" * 70_000
    _supervise(tmp_path, ["sh", "-c", 'echo "${#BIG}"'], env={"BIG": big})
    assert (tmp_path / "job.log").read_text() == "70000\n"


def test_records_the_jobs_exit_while_a_helper_it_daemonized_lives_on(tmp_path: Path) -> None:
    """The helper is reparented to the supervisor, which writes the job's own exit record at
    once, holds the helper (kill_old finds it as its child) and exits after it."""
    marker = sleep_marker()
    sup, lines = _start(tmp_path, [sys.executable, "-c", DAEMONIZE, marker, "exit 3"])
    try:
        exit_file = tmp_path / "job.exit"
        assert wait_for(exit_file.exists, 10)
        record = json.loads(exit_file.read_text())
        assert record["pid"] == int(lines[0].split()[1]) and record["returncode"] == 3, record
        helper = _helper(marker)
        assert _children(sup.pid) == {helper: "S"}  # adopted, alive, and the job reaped
        time.sleep(0.3)
        assert sup.poll() is None  # held while the helper lives
        os.kill(helper, signal.SIGKILL)
        assert sup.wait(timeout=10) == 0  # reaped it, then left
        assert json.loads(exit_file.read_text()) == record
    finally:
        sup.kill()
        sup.wait()
        for pid in pids_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_adopted_orphans_that_exit_while_the_job_runs_are_reaped(tmp_path: Path) -> None:
    """No zombies pile up under a long job whose helpers come and go; the job's status is the one recorded."""
    marker = sleep_marker()
    go = tmp_path / "go"  # the job ends itself (SIGTERM) once this exists
    tail = f"while [ ! -e {go} ]; do sleep 0.02; done; kill -TERM $$ # {marker}"
    sup, lines = _start(tmp_path, [sys.executable, "-c", DAEMONIZE, marker, tail])
    job = int(lines[0].split()[1])
    try:
        helper = _helper(marker)
        assert wait_for(lambda: helper in _children(sup.pid), 5)
        os.kill(helper, signal.SIGKILL)
        assert wait_for(lambda: helper not in _children(sup.pid), 5), _children(sup.pid)
        assert job in _children(sup.pid)
        go.touch()
        assert sup.wait(timeout=30) == 0
        record = json.loads((tmp_path / "job.exit").read_text())
        assert record["pid"] == job and record["signal"] == signal.SIGTERM and record["returncode"] is None
    finally:
        sup.kill()
        sup.wait()
        for pid in pids_with(marker):
            os.kill(pid, signal.SIGKILL)
