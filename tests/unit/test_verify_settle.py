"""verify's verdict on a supervised job that died a moment ago waits for its exit record.

The job is a real child of this test that has exited but is not reaped yet (a zombie, as a
job is between its death and its supervisor's waitpid); its exit record lands 0.6 s later,
as it does when an OOM-killed job takes time to release its memory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.agent_ns import AGENT


def _dead_job(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, dict[str, str]]:
    with open(tmp_path / "job.log", "wb") as log:
        job = subprocess.Popen(["sh", "-c", "echo started; exit 0"], stdout=log)
    deadline = time.monotonic() + 10
    while AGENT["read_proc"](job.pid).state != "Z":  # exited, left unreaped: a zombie
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pidfile = tmp_path / "job.pid"
    paths = AGENT["pidfile_paths"](str(pidfile))
    record = {"pid": job.pid, "start": AGENT["read_proc"](job.pid).start, "argv": ["sh"],
              "log": str(tmp_path / "job.log"), "log_offset": 0, "started_at": time.time(),
              "boot_id": AGENT["boot_id"](),
              "supervisor": [os.getpid(), AGENT["read_proc"](os.getpid()).start]}  # this test: alive, as a supervisor
    Path(paths["meta"]).write_text(json.dumps(record))
    pidfile.write_text(f"{job.pid}\n")
    return job, pidfile, paths


def test_a_late_exit_record_is_waited_for(tmp_path: Path) -> None:
    job, pidfile, paths = _dead_job(tmp_path)
    late = {"pid": job.pid, "start": None, "ended_at": time.time(), "returncode": None, "signal": 9, "oom_kills": 1}
    writer = threading.Timer(0.6, lambda: Path(paths["exit"]).write_text(json.dumps(late)))
    writer.start()
    try:
        result = AGENT["op_verify"]({"pidfile": str(pidfile), "processes": 1, "log": str(tmp_path / "job.log"),
                                     "within": 0, "budget": 30})
    finally:
        writer.join()
        job.wait()
    assert result["ok"] is False
    assert "was killed by signal 9 (SIGKILL)" in result["diagnosis"], result["diagnosis"]
    assert result["status"]["state"] == "killed by SIGKILL"


def _verify_without_a_coming_record(tmp_path: Path, **meta_changes: Any) -> None:
    """A dead job whose exit record nothing will write: the verdict comes at once."""
    job, pidfile, paths = _dead_job(tmp_path)
    meta = json.loads(Path(paths["meta"]).read_text())
    Path(paths["meta"]).write_text(json.dumps(dict(meta, **meta_changes)))
    try:
        t0 = time.monotonic()
        result = AGENT["op_verify"]({"pidfile": str(pidfile), "processes": 1, "log": str(tmp_path / "job.log"),
                                     "within": 0, "budget": 30})
        took = time.monotonic() - t0
    finally:
        job.wait()
    assert result["ok"] is False
    assert "no exit status was recorded" in result["diagnosis"], result["diagnosis"]
    assert took < 4, took  # not the 30 s wait for a record that nothing will write


def test_without_a_supervisor_record_the_verdict_is_not_delayed(tmp_path: Path) -> None:
    _verify_without_a_coming_record(tmp_path, supervisor=None)  # a launch without a supervisor


def test_no_wait_once_the_supervisor_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a supervisor that was killed: it will write no record
    _verify_without_a_coming_record(tmp_path, supervisor=[gone.pid, 1])


def test_a_launched_job_whose_supervisor_reaps_it_late_is_named_by_its_signal(tmp_path: Path) -> None:
    """Through the real launch: the launch record names the supervisor whose exit record
    verify waits for. The supervisor is held (SIGSTOP) while its job is SIGKILLed, so the job stays an unreaped
    zombie, as a job is while its memory is released; 0.6 s later the supervisor goes on,
    reaps it and writes the record."""
    pidfile, log = tmp_path / "job.pid", tmp_path / "job.log"
    launched = AGENT["op_launch"]({"argv": ["sleep", "300"], "log": str(log), "pidfile": str(pidfile)})
    assert launched.get("changed") is True, launched
    job = int(launched["pid"])
    meta = json.loads(Path(AGENT["pidfile_paths"](str(pidfile))["meta"]).read_text())
    supervisor = int(meta["supervisor"][0])
    os.kill(supervisor, signal.SIGSTOP)
    try:
        os.kill(job, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while AGENT["read_proc"](job).state != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        resume = threading.Timer(0.6, os.kill, (supervisor, signal.SIGCONT))
        resume.start()
        result = AGENT["op_verify"]({"pidfile": str(pidfile), "processes": 1, "log": str(log),
                                     "within": 0, "budget": 30})
        resume.join()
    finally:
        os.kill(supervisor, signal.SIGCONT)
        with contextlib.suppress(ProcessLookupError):
            os.kill(job, signal.SIGKILL)
    assert result["ok"] is False
    assert "was killed by signal 9 (SIGKILL)" in result["diagnosis"], result["diagnosis"]
