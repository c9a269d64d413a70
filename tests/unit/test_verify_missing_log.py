"""verify's log regex checks on a log that does not exist: they fail as checks (there is no
text to match), beside log_exists; the op used to fail with KeyError: 'text'."""

from __future__ import annotations

import subprocess
from pathlib import Path

from opsrunner.remote import agent, verify


def test_regex_checks_on_a_missing_log_fail_as_checks(tmp_path: Path) -> None:
    log = tmp_path / "never.log"
    reply = verify.op_verify({"log": str(log), "log_regex": "ready", "log_not_regex": "Traceback", "within": 0})
    assert reply["ok"] is False
    assert [list(c) for c in reply["checks"]] == [
        ["log_exists", False, "exists", "missing"],
        ["log_regex", False, "log matches /ready/", "no match"],
        ["log_not_regex", True, "log free of /Traceback/", "absent"],
    ]
    assert reply["diagnosis"] == f"never started: no matching process and no log at {log}"


def test_the_reply_is_the_same_through_the_dispatcher(tmp_path: Path) -> None:
    reply = agent.dispatch({"op": "verify", "args": {"log": str(tmp_path / "x.log"), "log_regex": "r"}})
    assert "error" not in reply and reply.get("ok") is False, reply


def test_a_live_job_without_its_log_is_told_no_log_not_hung(tmp_path: Path, cleanup_marker: str) -> None:
    log = tmp_path / "never.log"
    job = subprocess.Popen(["sleep", cleanup_marker])
    try:
        reply = verify.op_verify({"pattern": f"sleep {cleanup_marker}", "processes": 1, "log": str(log),
                                  "log_exists": False, "log_grows": 0.5, "within": 1})
        assert reply["ok"] is False
        assert [list(c) for c in reply["failed"]] == [["log_grows", False, "grows within every 0.5s", "no log"]]
        assert reply["diagnosis"] == f"no log at {log}: the job is running but its log was never written " \
                                     "(there is no such file)"
        assert reply["status"]["state"] == "no log" and reply["status"]["pid"] == job.pid
        # A log that exists and stays empty is the other case: hung, at 0 bytes.
        log.write_bytes(b"")
        reply = verify.op_verify({"pattern": f"sleep {cleanup_marker}", "processes": 1, "log": str(log),
                                  "log_grows": 0.5, "within": 1})
        assert reply["diagnosis"] == (f"hung: the job is running but its log {log} has not grown since the launch "
                                      "(0 bytes); log_grows allows 0.5s")
    finally:
        job.kill()
        job.wait()
