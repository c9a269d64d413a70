"""rollback: put the job's last good run back (remote/rollback.py does it on the target) and
say in one line what failed and how the rollback went.

In requests of their own, as a restart's tasks: the target stops the job, switches `current`
and relaunches ("start"), then the relaunched run is verified against what it was launched
with (checks_for). A relaunched job is so never part of a request that still runs when the
controller goes away (the agent ends that request's whole tree): it keeps running, as a job
launch_detached started does. When the relaunch fails, "undo" records its release as failed
and, after a hand rollback, starts what ran before again, which is verified in turn."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from opsrunner import interrupts
from opsrunner.coercion import coerce_args
from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.locks.job_lock import hold_for_job
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.own_session import StartedJob, end_not_seen, start_in_own_session
from opsrunner.modules.verify import VerifyModule, failure_reason, status_line, verify_budget
from opsrunner.results import Status, TaskResult
from opsrunner.validation import load_schema

if TYPE_CHECKING:
    from opsrunner.remote.protocol_jobs import ExitRecord, RollbackArgs, RollbackReply, VerifyArgs, VerifyReply

#: Characters of a failure's diagnosis kept in the one-line message.
DIAGNOSIS_CHARS = 300
#: The failed task's modules after which the restart's new launch is recorded as failed.
LAUNCH_MODULES = ("launch_detached", "verify")
#: A restart that failed in one of these stopped nothing yet: its rescue leaves whatever runs running.
BEFORE_STOP_MODULES = ("deploy_code",)
#: verify's arguments that say how long to check, not what: the given ones apply to any run.
TIMING = ("within", "stable_for", "log_grows", "fail_grace")
#: verify's checks of the host, not of the run: always the given ones (a port or a GPU the
#: host no longer has is no fault of the run put back; one given is asked for).
HOST_CHECKS = ("port", "gpu_min_memory_mb", "gpus", "user")
#: verify's checks of the run itself: where the good run's record keeps checks, these come from it alone.
RUN_CHECKS = ("pattern", "processes", "min_processes", "log", "log_exists", "log_min_bytes", "log_regex",
              "log_not_regex")
#: Run checks that can only find a fault: a given one still applies where the record lacks it.
FAULT_CHECKS = ("log_not_regex",)
#: verify's arguments the rollback sets itself.
OWN = ("pidfile", "record_good", "budget")
#: Characters of a check's value (not a log's path, shown whole) the line shows.
VALUE_CHARS = 80


def failure_text(failed_task: str | None, failure: dict[str, Any] | None) -> str:
    """`TASK failed: WHY` from a failed task's registered result (ansible_failed_result):
    verify's reason (its diagnosis, or the failed checks where that only lists the running
    job's processes: failure_reason), else its message's first line; "" without a failed task."""
    if not failed_task:
        return ""
    result = failure or {}
    why = str(result.get("reason") or result.get("diagnosis") or result.get("msg") or "").strip()
    why = why.splitlines()[0] if why else "no message"
    return f"{failed_task} failed: {_clip(why)}"


def not_started_text(failure: Mapping[str, Any] | None, stopped: list[int]) -> str:
    """After a failed launch check (launch_detached check_only, made before the old job is
    stopped): that the new run could not start, and that the old job (the check saw it run)
    was left running where the rollback stopped nothing; "" after any other failure."""
    if not (failure or {}).get("check_only"):
        return ""
    running = (failure or {}).get("running")
    if stopped:
        return f"the new run could not start; the old run (pid {', '.join(map(str, stopped))}) was stopped"
    if running:
        return f"the new run could not start, so the old run (pid {running}) was left running"
    return "the new run could not start; nothing was stopped"


def _clip(text: str) -> str:
    return text[:DIAGNOSIS_CHARS] + "..." if len(text) > DIAGNOSIS_CHARS else text


def release_text(release: str | None, commit: str | None) -> str:
    if not release:
        return "the last good run's launch (no release: the code deployed in place stays)"
    return f"release {release} ({f'commit {commit}' if commit else 'no git commit'})"


def unlinked_text(reply: RollbackReply) -> str:
    """Where the run gone back to is a plain deploy's: the `current` link that was removed
    (it would otherwise name a release that does not run), and what it pointed to."""
    link = reply.get("unlinked")
    limits = f"; {reply['scan_limits']}" if reply.get("scan_limits") else ""
    if reply.get("current_kept"):  # another job runs from that release: said as the deploy says it
        return f"; current {reply['current_kept']}{limits}"
    if not link:
        return ""
    was = f"release {reply['switched_from']}" if reply.get("switched_from") else "no release"
    return (f"; current removed ({link} pointed to {was}, which is not what runs: the last good run is a plain "
            f"deploy's, not a release's){limits}")


def outcome_text(reply: RollbackReply, after_failure: bool = True, by_hand: bool = False,
                 note: str = "") -> tuple[Status, str]:
    """The task's status and the rollback's part of the line (after_failure: it follows what
    failed, so a rollback that fails fails "too"). by_hand (not `auto`): a rollback asked for
    that finds nothing to roll back to fails, as one finding no release before current does;
    the restart's own rescue fails the run with its `fail` task, so there it is only said.
    note: what the relaunched run was verified with, where not the checks given (checks_for)."""
    outcome, where = reply.get("outcome"), release_text(reply.get("release"), reply.get("commit"))
    if outcome == "rolled_back":
        return Status.CHANGED, f"rolled back to {where}, pid {reply.get('pid')}, verified{note}{unlinked_text(reply)}"
    if outcome == "nothing":
        back = _switched_back(reply)
        return Status.CHANGED if back else Status.OK, (
            f"no rollback needed: the last good run ({where}, pid {reply.get('pid')}) is still running; nothing "
            f"was stopped{back}")
    if outcome == "kept":
        back = _switched_back(reply)
        return Status.CHANGED if back else Status.OK, (
            f"no rollback: the job that runs (pid {reply.get('pid')}) was left running; nothing was stopped{back}")
    if outcome == "no_good_run":
        return Status.FAILED if by_hand else Status.OK, f"no rollback: {reply.get('why')}"
    if outcome == "would":
        stop = ", ".join(map(str, reply.get("stopped") or [])) or "nothing running"
        switch = ""
        if reply.get("release"):
            current = reply.get("switched_from")
            switch = (", current already points to it" if current == reply.get("release")
                      else f", switch current from {current or 'nothing'} to it")
        elif reply.get("unlinked"):
            switch = f", remove current ({reply['unlinked']} points to release {reply.get('switched_from')})"
        return Status.CHANGED, (f"would roll back to {where}: stop {stop}{switch}, start "
                                f"{shlex.join(reply.get('argv') or [])}"
                                + (f" in {reply['chdir']}" if reply.get("chdir") else "") + ", verify it")
    too = " too" if after_failure else ""
    if "release" not in reply:  # it failed before it knew where to go
        return Status.FAILED, f"rollback failed{too}: {reply.get('why')}"
    return Status.FAILED, f"rollback to {where} failed{too}: {reply.get('why')}{unlinked_text(reply)}"


class _Progress:
    """The task's time, and what its steps saw, shared by the rollback's requests."""

    def __init__(self, timeout: float | None, ctx: TaskContext, failed: str) -> None:
        self.timeout, self.t0 = timeout, time.monotonic()
        self.ctx, self.failed = ctx, failed
        #: What the task's result warns of (a step's own session not seen to end).
        self.warnings: list[str] = []
        #: The wrapper chain ended the relaunched job with its session (not the release's fault).
        self.chain_ended_it = False

    def so_far(self, text: str) -> None:
        """What the rollback has done on the target until now, as its message says it should the
        run be interrupted (Ctrl-C, SIGTERM) before the next step answers (interrupts.so_far)."""
        interrupts.so_far(self.ctx.host, self.ctx.task, f"{self.failed}; {text}" if self.failed else text)

    def took(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def left(self) -> float | None:
        return None if self.timeout is None else max(0.5, self.timeout - (time.monotonic() - self.t0))


class RollbackModule(Module):
    name = "rollback"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        known = set(load_schema("modules/verify")["properties"])  # (pidfile and record_good: set by the op)
        checks = args.get("verify") or {}
        unknown = sorted(set(checks) - known)
        if unknown:
            return [f"rollback verify: unknown verify argument(s) {', '.join(unknown)} "
                    f"(known: {', '.join(sorted(known))})"]
        # The op gives the verify this pidfile: with no count, it checks that the job runs.
        return VerifyModule().sanity({**checks, "pidfile": args.get("pidfile")}) if checks else []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        failed = failure_text(args.get("failed_task"), args.get("failure"))
        untouched = _joined(failed, not_started_text(args.get("failure"), []))  # as long as nothing is stopped
        if not args.get("enabled", True):
            return _result(Status.OK, untouched, "no rollback: it is off (rollback_on_failure: false)", {})
        too = " too" if failed else ""
        try:
            hold_for_job(ctx, str(args["pidfile"]))  # the lock covers the rollback as the restart
        except ModuleFailure as exc:  # another run holds the job: the line names it; nothing was touched
            why = " ".join(str(exc).split())
            return _result(Status.FAILED, untouched, f"rollback failed{too}: {why}",
                           {"outcome": "failed", "stopped": [], "pid": None, "why": why})
        progress, extra = _Progress(ctx.timeout, ctx, failed), dict[str, Any]()
        try:
            progress.so_far("rollback interrupted before its start step answered: the target may have stopped the "
                            "job, switched current and relaunched the last good run; what runs there is not known")
            reply = _step(ctx, _start_request(ctx, args, failed), progress)
            if reply.get("outcome") == "launched":
                status, text = _judge(ctx, args, reply, progress, bool(failed), extra)
            else:
                status, text = outcome_text(reply, after_failure=bool(failed), by_hand=not args.get("auto"))
        except ModuleFailure as exc:
            return _result(Status.FAILED, failed, f"rollback failed{too}: {str(exc).splitlines()[0]}", {})
        failed = _joined(failed, not_started_text(args.get("failure"), list(reply.get("stopped") or [])))
        data: dict[str, Any] = {k: reply.get(k) for k in ("outcome", "release", "commit", "pid", "stopped",
                                                           "switched_from", "verified", "took_s")}
        for key in ("unlinked", "current_kept", "scan_limits", "why"):
            if reply.get(key):
                data[key] = reply[key]
        data.update(extra)
        if reply.get("known_failed"):
            data["known_failed"] = reply["known_failed"]
        if reply.get("outcome") == "would":
            ctx.ledger.would_stop.update(reply.get("stopped") or [])
            ctx.ledger.would_launch.append(str(args["pidfile"]))
        if reply.get("known_failed") and reply.get("outcome") in ("rolled_back", "would", "timed_out"):
            text += f"; warning: {_known_failed(reply)}"
        detail = status_line(dict(reply["status"])) if reply.get("status") else ""
        result = _result(status, failed, text, data, detail)
        result.warnings.extend(progress.warnings)
        if reply.get("known_failed"):
            result.warnings.append(f"release {reply.get('release')} was recorded as failed: {reply['known_failed']}; "
                                   f"the rollback goes to it because {_why_there(args)}")
        return result


def _switched_back(reply: RollbackReply) -> str:
    """The line's part for a `current` switched back to the release of the run left running."""
    if "switched_from" not in reply:
        return ""
    return f"; current switched back from {reply.get('switched_from') or 'nothing'} to {reply.get('release')}"


def _why_there(args: dict[str, Any]) -> str:
    """Why a rollback goes to a release recorded as failed: named by hand, or the last good
    run's (the restart's own rollback, or one by hand without a release, puts that run back)."""
    if args.get("release") and args["release"] != "previous":
        return "it was named (release=" + str(args["release"]) + ")"
    return "it is the last good run's release (the run a rollback puts back)"


def given_checks(args: Mapping[str, Any]) -> dict[str, Any]:
    """The rollback's `verify` (default: exactly one process), converted to verify's types
    as a verify task's arguments are: the checks a failed restart's verify was judged by read
    the same here (`-e verify_within=30` is the number 30 in both)."""
    converted, _ = coerce_args(args.get("verify") or {"processes": 1}, load_schema("modules/verify"))
    return converted


def _start_request(ctx: TaskContext, args: dict[str, Any], failed: str) -> RollbackArgs:
    request: RollbackArgs = {"pidfile": str(args["pidfile"]), "step": "start", "auto": bool(args.get("auto")),
                         "grace": float(args.get("grace", 10)), "check_mode": ctx.check_mode}
    for key in ("release", "pattern"):
        if args.get(key):
            request[key] = str(args[key])
    failed_task = ctx.variables.get("ansible_failed_task")
    checked_only = bool((args.get("failure") or {}).get("check_only"))  # a launch check: nothing was launched
    action = failed_task.get("action") if isinstance(failed_task, Mapping) else None
    if args.get("auto") and (checked_only or action in BEFORE_STOP_MODULES):
        request["keep_running"] = True  # ...nor stopped: whatever runs is what the restart found
    if (failed and args.get("auto") and isinstance(failed_task, Mapping)
            and failed_task.get("action") in LAUNCH_MODULES and not checked_only):
        request["failed"] = failed  # the restart's new launch failed: its release is recorded as failed
        # ...unless it passed with another launch or other checks than those it was judged by
        request["checks"] = cast("VerifyArgs", given_checks(args))
    return request


def _step(ctx: TaskContext, request: RollbackArgs, progress: _Progress) -> RollbackReply:
    """One step on the target. Behind a wrapper chain a step that starts the job runs in an exec
    session of its own (own_session.py), so a job the chain ends with its session is seen gone
    now, not verified as running and then ended with the run's session."""
    step, survival = start_in_own_session(ctx, ops.ROLLBACK, request, progress.left(), _started_by, "started")
    if survival.unseen:
        progress.warnings.append(end_not_seen("the rollback's"))
    # A job that exited by itself before its session ended failed as one that exits at once
    # does on the target (its release is recorded failed); one the chain ended did not.
    why = _exited_text(step, survival.exited) if survival.exited else survival.gone
    if why and step.get("outcome") == "restoring":
        step["outcome"], step["restore_error"] = "failed", why
    elif why:
        step["why"], progress.chain_ended_it = why, not survival.exited
    return step


def _exited_text(step: RollbackReply, record: ExitRecord) -> str:
    """As the target words a started job that exits at once (remote/rollback.py)."""
    job = "the relaunched job" if step.get("outcome") == "launched" else "the job started again"
    return f"{job} (pid {step.get('pid')}) exited at once with code {record.get('returncode')}"


def _started_by(step: RollbackReply) -> StartedJob:
    """The job a step started (its relaunch, or undo's restart of what ran before), or no pid."""
    relaunched = step.get("outcome") == "launched" and not step.get("why")
    if relaunched or step.get("outcome") == "restoring":
        return StartedJob(step.get("pid"), step.get("start"), step.get("exit_file"))
    return StartedJob(None)


def checks_for(given: Mapping[str, Any], started: RollbackReply) -> tuple[dict[str, Any], str]:
    """verify's arguments for a run a step started again (`started`: its reply), and what the
    line says of them. A failed redeploy's new log_path, ready_regex or count says nothing of
    the run put back: where its record holds the checks it passed when it was recorded good,
    the run's own checks come from that record alone. A given one the record lacks (a ready
    line the old run never printed, a pattern it was never counted by) is left out, as it may
    be the very setting that failed the redeploy; only a check that can find nothing but a
    fault (log_not_regex) still applies. The host's checks (port, GPUs, user) and the timing
    are the given ones. An older record (no checks): the given ones, as they are. Where they
    differ from the given checks, the note says with what: ` with the checks of its good run
    (log /a/train.log, log_regex, without pattern)`: a log by its path, a number as it is,
    other text by its key alone (it may hold an old secret the run no longer knows to mask)."""
    recorded = started.get("checks")
    check = dict(given)
    if recorded is not None:
        for key in RUN_CHECKS:
            check.pop(key, None)
        check.update({k: v for k, v in recorded.items() if k not in TIMING and k not in OWN and k not in HOST_CHECKS})
        for key in FAULT_CHECKS:
            if key in given and key not in recorded:
                check[key] = given[key]
    differ = sorted(k for k in set(check) | set(given)
                    if k not in TIMING and k not in OWN and check.get(k) != given.get(k))
    if not differ:
        return check, ""
    said = ", ".join(_said(k, check[k]) if k in check else f"without {k}" for k in differ)
    return check, f" with the checks of its good run ({said})"


def _said(key: str, value: object) -> str:
    if key == "log" and isinstance(value, str):
        return f"log {value}"  # whole: a path cut short names no file
    if not isinstance(value, str):
        text = json.dumps(value)
        return f"{key} {text[:VALUE_CHARS] + '...' if len(text) > VALUE_CHARS else text}"
    return key


def _verify(ctx: TaskContext, args: dict[str, Any], progress: _Progress,
            started: RollbackReply) -> tuple[VerifyReply, str]:
    """Verify the job a step started (checks_for), in a request of its own; passing, it is the
    last good run. With the verdict, what the line says it was verified with."""
    checks, note = checks_for(given_checks(args), started)
    check = cast("VerifyArgs", checks)
    check["pidfile"] = str(args["pidfile"])
    check["record_good"] = True
    left = progress.left()
    if left is not None:
        check["budget"] = verify_budget(left)
    return ctx.agent(ops.VERIFY, check, timeout=left), note


def _judge(ctx: TaskContext, args: dict[str, Any], reply: RollbackReply, progress: _Progress, after_failure: bool,
           extra: dict[str, Any]) -> tuple[Status, str]:
    """The target was relaunched: verify it; when it fails, undo (and verify what undo restarted,
    in extra["restored"])."""
    why = reply.get("why")
    if not why:
        progress.so_far(f"rollback interrupted after its start step: {_started_text(reply)}, not verified (not "
                        "recorded as the last good run)")
        verdict, note = _verify(ctx, args, progress, reply)
        reply["status"], reply["verified"] = verdict["status"], bool(verdict.get("ok"))
        reply["took_s"] = progress.took()
        if verdict.get("ok"):
            reply["outcome"] = "rolled_back"
            return outcome_text(reply, after_failure, note=note)
        if verdict.get("cut_short"):
            reply["outcome"] = "timed_out"
            return Status.TIMED_OUT, _out_of_time(reply, verdict, progress)
        why = f"the relaunched run failed verify{note}: {_clip(failure_reason(verdict))}"
    reply["outcome"] = "failed"
    reply["why"] = f"{why} (warning: {_known_failed(reply)})" if reply.get("known_failed") else why
    request: RollbackArgs = {"pidfile": str(args["pidfile"]), "step": "undo", "auto": bool(args.get("auto")),
                         "why": why, "back_to": reply.get("switched_from"), "grace": float(args.get("grace", 10)),
                         "checks": cast("VerifyArgs", checks_for(given_checks(args), reply)[0])}
    if reply.get("release") and not progress.chain_ended_it:  # the release is recorded as failed
        request["release"] = str(reply.get("release"))
    progress.so_far(f"rollback interrupted while undoing it: {_started_text(reply)}, and it failed ({_clip(why)}); "
                    f"the target was stopping it and putting back what ran before: what runs there is not known")
    undone = _step(ctx, request, progress)
    _, text = outcome_text(reply, after_failure)
    if undone.get("outcome") == "restoring" or undone.get("restore_error"):
        return Status.FAILED, text + _restored(ctx, args, reply, undone, progress, extra)
    if undone.get("prior_error"):  # something ran before, but its saved launch cannot be read
        extra["prior_error"] = undone["prior_error"]
        text += f"; what ran before the rollback was not started again: {undone['prior_error']}"
    if undone.get("switched_back"):
        text += f"; current switched back to {undone['switched_back']}"
    if undone.get("running"):
        return Status.FAILED, text + f"; pid {undone['running']} still runs from it, not verified"
    before = "" if args.get("auto") or undone.get("prior_error") else "; nothing was running before the rollback either"
    return Status.FAILED, text + before + "; nothing is running"


def _started_text(reply: RollbackReply) -> str:
    """What the start step did: `stopped pid A; current switched from X to R; pid P started from
    release R (commit C)`."""
    stopped = ", ".join(map(str, reply.get("stopped") or []))
    parts = [f"stopped pid {stopped}"] if stopped else ["nothing was running to stop"]
    if reply.get("release") and reply.get("switched_from") == reply.get("release"):
        parts.append(f"current already names {reply.get('release')}")  # a redeploy of the same code
    elif reply.get("release") and "switched_from" in reply:
        parts.append(f"current switched from {reply.get('switched_from') or 'nothing'} to {reply.get('release')}")
    elif reply.get("unlinked"):
        parts.append(f"current ({reply['unlinked']}) removed: it pointed to release {reply.get('switched_from')}")
    parts.append(f"pid {reply.get('pid')} started from {release_text(reply.get('release'), reply.get('commit'))}")
    return "; ".join(parts)


def _known_failed(reply: RollbackReply) -> str:
    return f"release {reply.get('release')} was known to have failed: {_clip(str(reply.get('known_failed')))}"


def _restored(ctx: TaskContext, args: dict[str, Any], reply: RollbackReply, undone: RollbackReply, progress: _Progress,
              extra: dict[str, Any]) -> str:
    """The part of the line saying how what ran before the rollback was started again, and
    what runs now."""
    where, pid = release_text(undone.get("release"), undone.get("commit")), undone.get("pid")
    back = f"; current switched back to {undone['switched_back']}" if undone.get("switched_back") else ""
    extra["restored"] = restored = {"release": undone.get("release"), "pid": pid, "verified": False}
    if undone.get("outcome") != "restoring":
        now = (f"pid {undone['running']} (the failed relaunch) still runs" if undone.get("running")
               else "nothing is running")
        return f"; starting what ran before ({where}) again failed: {undone.get('restore_error')}{back}; {now}"
    progress.so_far(f"rollback interrupted while verifying what ran before, started again: the rollback's relaunch "
                    f"(pid {reply.get('pid')}) failed ({_clip(str(reply.get('why')))}); {where} started again as "
                    f"pid {pid}, not verified{back}")
    verdict, note = _verify(ctx, args, progress, undone)
    reply["took_s"] = progress.took()
    if verdict.get("ok"):
        restored["verified"] = True
        return f"; what ran before is running again: {where}, pid {pid}, verified{note}{back}"
    state = str(verdict["status"].get("state"))
    if verdict.get("cut_short"):
        return (f"; what ran before was started again ({where}, pid {pid}) but the time ran out verifying it: "
                f"it is {state}, not verified{back}")
    alive = verdict["status"].get("pid")  # verify names a pid only where it is alive: whatever its state says
    now = f"pid {alive} still runs, not verified" if alive else "nothing is running"
    return (f"; what ran before was started again ({where}, pid {pid}) but failed verify too{note}: "
            f"{_clip(failure_reason(verdict))}{back}; {now}")


def _out_of_time(reply: RollbackReply, verdict: VerifyReply, progress: _Progress) -> str:
    """The rollback's verify was cut short by the task's timeout: what state it left."""
    where = release_text(reply.get("release"), reply.get("commit"))
    state = str(verdict["status"].get("state"))
    current = f"; current -> {reply.get('release')}" if reply.get("release") else unlinked_text(reply)
    return (f"rollback to {where} ran out of time: the task's timeout ({progress.timeout:g}s) came "
            f"{verdict.get('waited_s', 0):g}s into verifying the relaunched run (pid {reply.get('pid')}), before "
            f"its checks could pass for long enough; it is {state}, not verified (not recorded as the last good "
            f"run){current}. Give the rollback more time (its timeout) than verify's within + stable_for + log_grows")


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _result(status: Status, failed: str, text: str, data: dict[str, Any], detail: str = "") -> TaskResult:
    summary = f"{failed}; {text}" if failed else text
    data["summary"] = summary
    msg = summary + (f"\n{detail}" if detail else "")
    return TaskResult(status, changed=status == Status.CHANGED, msg=msg, data=data)


MODULE = RollbackModule()
