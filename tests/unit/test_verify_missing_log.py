"""verify's log regex checks on a log that does not exist: they fail as checks (there is no
text to match), beside log_exists; the op used to fail with KeyError: 'text'."""

from __future__ import annotations

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
