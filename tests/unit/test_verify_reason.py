"""verify's one-line reason (what a restart's rollback line and its final `fail` say failed):
its diagnosis, except where that only lists the running job's processes (nothing happened to
the job: a ready line never came, a count was off); then the failed checks, named as the
verify's own message names them, and how long they were checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.modules.rollback import failure_text
from opsrunner.modules.verify import failure_reason

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import VerifyReply


def _reply(**extra: Any) -> VerifyReply:
    procs = [{"pid": 20864, "cmdline": "/root/.pyenv/versions/3.11/bin/python3 -u /root/train/current/train.py"}]
    reply: dict[str, Any] = {"ok": False, "checks": [], "procs": procs, "log_size": 10, "status": {},
                             "failed": [["log_regex", False, "log matches /NEVERMATCHES/", "no match"]],
                             "diagnosis": f"running: 20864 {procs[0]['cmdline']}", "waited_s": 30.04, **extra}
    return reply  # type: ignore[return-value]  # the agent's reply, as the wire brings it


def test_the_reason_names_the_failed_check_where_the_diagnosis_only_lists_the_job() -> None:
    assert failure_reason(_reply()) == "log_regex: expected log matches /NEVERMATCHES/, got no match (checked for " \
                                       "30.04s)"
    exited = "the job (pid 20864) exited with code 1, 1.3s after its launch"
    assert failure_reason(_reply(diagnosis=exited)) == exited
    seen = "running: the job (pid 20864) is still running 5s after its log matched /Traceback/: Traceback (most"
    assert failure_reason(_reply(diagnosis=seen)) == seen


def test_the_restart_line_says_the_reason_not_the_first_line_of_the_message() -> None:
    reply = _reply()
    first = "log_regex: expected log matches /NEVERMATCHES/, got no match"
    registered = {"msg": f"{first}\ndiagnosis: {reply['diagnosis']}", "diagnosis": reply["diagnosis"],
                  "reason": failure_reason(reply)}
    assert failure_text("Verify", registered) == ("Verify failed: log_regex: expected log matches /NEVERMATCHES/, got "
                                                  "no match (checked for 30.04s)")
