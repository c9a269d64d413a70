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
from pathlib import Path

from opsrunner.remote import supervisor
from opsrunner.remote.launch import SUPERVISOR_BOOT as BOOT
from opsrunner.remote.launch import supervisor_code


def _supervise(tmp_path: Path, argv: list[str], **spec: object) -> tuple[list[str], dict[str, object]]:
    """Run the supervisor over argv; (handshake lines, exit record)."""
    r, w = os.pipe()
    exit_file = tmp_path / "job.exit"
    full = {"argv": argv, "log": str(tmp_path / "job.log"), "exit_file": str(exit_file), "handshake_fd": w, **spec}
    env = dict(os.environ, OPSRUNNER_SPEC=binascii.b2a_base64(marshal.dumps(full), newline=False).decode(),
               OPSRUNNER_SUPERVISOR_CODE=supervisor_code())
    sup = subprocess.Popen([sys.executable, "-S", "-c", BOOT], env=env, pass_fds=(w,))
    os.close(w)
    with os.fdopen(r, "rb") as handshake:
        lines = handshake.read().decode().splitlines()
    assert sup.wait(timeout=60) == 0
    return lines, json.loads(exit_file.read_text())


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
