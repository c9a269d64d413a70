"""`opsrunner schedule run NAME`: what the timer runs. Optional fast-forward of the project,
then the playbook through the library (api.run, in this process, with the run lock and the
history recorded under the schedule's name), then the alert. Exits with the play's exit code.

The run is not a child process: the timer already gives every scheduled run a process of
its own (the service, or cron's command), so one more would isolate nothing, and in-process
the run is assembled by the same code as `opsrunner play` and masked by the same Masker.
"""

from __future__ import annotations

import contextlib
import socket
import time
import traceback
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opsrunner.errors import OpsrunnerError, ValidationError
from opsrunner.exitcodes import EXIT_VALIDATION, exit_code_of
from opsrunner.gitrepo import run_git
from opsrunner.history.location import display, resolve, scrub
from opsrunner.history.recorder import new_run_id
from opsrunner.history.store import HistoryStore, result_of
from opsrunner.history.taskrows import FAILED_STATUSES, FailedTasks
from opsrunner.outstream import lost_notes
from opsrunner.schedule.changes import killed_in, run_changes, stopped_changes
from opsrunner.schedule.notify import Alert, aborted_alert, alert_for, label, send, should_notify
from opsrunner.schedule.store import Schedule

if TYPE_CHECKING:
    from opsrunner.history.rows import RunRow, TaskRow
    from opsrunner.playrequest import PlayRequest
    from opsrunner.reporting import ConsoleReporter

EXIT_REFUSED = 2
#: How long `--git-pull`'s pull may take (a remote over a slow link) before the run is refused.
GIT_PULL_TIMEOUT_S = 300


def git_pull(project: Path) -> tuple[str | None, str | None]:
    """Fast-forward the project's checkout: (why not, when it is dirty or has diverged; what it
    pulled: `pulled OLD..NEW` or `already up to date at COMMIT`, for the output and the record)."""
    if not project.is_dir():  # moved, or a volume not mounted: never the checkout of a folder above it
        return f"refusing to run: the project folder {project} is missing", None
    status = run_git(project, "status", "--porcelain", "--untracked-files=no", timeout=GIT_PULL_TIMEOUT_S)
    if status is None:
        return (f"refusing to run: git is missing or did not answer within {GIT_PULL_TIMEOUT_S:g} s "
                f"in {project}"), None
    if status.returncode != 0:
        return f"refusing to run: {project} is not a git checkout ({status.stderr.strip()})", None
    if status.stdout.strip():
        files = ", ".join(line[3:] for line in status.stdout.splitlines()[:5])
        return f"refusing to run: {project} has uncommitted changes ({files})", None
    old = _head(project)
    pull = run_git(project, "pull", "--ff-only", "--quiet", timeout=GIT_PULL_TIMEOUT_S)
    if pull is None or pull.returncode != 0:
        detail = (f"no answer within {GIT_PULL_TIMEOUT_S:g} s" if pull is None
                  else (pull.stderr.strip().splitlines() or ["no output"])[-1])
        return f"refusing to run: git pull --ff-only failed in {project} (diverged or unreachable): {detail}", None
    new = _head(project)
    if old is None or new is None:  # a commit it cannot name is not recorded as one
        return f"refusing to run: git rev-parse HEAD failed in {project} around the pull", None
    return None, (f"git pull: already up to date at {new}" if new == old else f"git pull: pulled {old}..{new}")


def _head(project: Path) -> str | None:
    head = run_git(project, "rev-parse", "HEAD", timeout=GIT_PULL_TIMEOUT_S)
    return head.stdout.strip() if head is not None and head.returncode == 0 else None


class GitPullRefused(OpsrunnerError):
    """`--git-pull` would not bring the checkout up to date (uncommitted changes, diverged,
    not a checkout): nothing ran. Exit 2; recorded as refused, with why."""

    exit_code = EXIT_REFUSED
    history_outcome = "refused"


def run_schedule(schedule: Schedule, out: IO[str], err: IO[str]) -> int:
    run_id = new_run_id()
    started = time.time()
    history = resolve(None)  # before the chdir: a relative OPSRUNNER_HISTORY names one file (or a URL)
    project = Path(schedule.project)
    request = _request(schedule, run_id, history)
    refused, pulled = git_pull(project) if schedule.git_pull else (None, None)
    if pulled:
        out.write(pulled + "\n")
        out.flush()
    shown = False
    failed = FailedTasks()  # what went wrong, for the alert, whether or not the history records it
    if refused:
        err.write(f"ERROR: {refused}\n")
        code = EXIT_REFUSED
        from opsrunner import api

        # recorded: `schedule list`, the dashboard and the next run's recovery alert see it
        with contextlib.chdir(project) if project.is_dir() else contextlib.nullcontext():
            api.record_not_run(request, GitPullRefused(refused))
    else:
        with contextlib.chdir(project):  # the schedule's paths are the project's, as `play` there
            code, refused, shown = _play(request, out, err, failed)
    if pulled:  # the run's record says which commits it ran (its row exists by now, or nothing is noted)
        _note(history, run_id, [pulled])
    # (outstream.py) the run's log is cut: its record says so, and its alert (the history may
    # be on the disk that is full, and stderr's warning goes to the same file under cron)
    lost = lost_notes([("output", out), ("error output", err)])
    _note(history, run_id, lost)
    summary = run_summary(schedule, run_id, code, started, refused, history, failed.rows, failed.kept)
    summary["output_lost"] = lost
    if summary["run_id"] and not shown:  # ended before its play began (run lock, git pull): recorded all the same
        out.write(f"run {run_id} (opsrunner show {run_id})\n")
    _notify(schedule, summary, err, history)
    return code


class BadScheduleFile(OpsrunnerError):
    """The schedule file does not load (edited by hand): nothing ran. Exit 4, recorded as bad
    input with why (file:line: the key)."""

    exit_code = EXIT_VALIDATION


def run_broken(path: Path, error: str, out: IO[str], err: IO[str]) -> int:
    """A schedule file that does not load, fired by its timer (or `schedule run`): nothing runs;
    best effort, from what salvage() reads of it, the run is recorded (bad input, exit 4, why)
    in the history the file names (else the default) and alerted to the URLs it names."""
    from opsrunner import api
    from opsrunner.schedule.lastruns import history_of
    from opsrunner.schedule.store import salvage

    err.write(f"ERROR: {error}\n")
    schedule = salvage(path)
    run_id, started = new_run_id(), time.time()
    history = resolve(history_of(schedule))
    request = api.PlayRequest(schedule.playbook or str(path), extra_vars=schedule.extra_vars, schedule=schedule.name,
                              run_id=run_id, history_path=history, argv=["schedule", "run", schedule.name])
    project = Path(schedule.project) if schedule.project else None
    with contextlib.chdir(project) if project and project.is_dir() else contextlib.nullcontext():
        api.record_not_run(request, BadScheduleFile(f"schedule file {path} does not load: {error}"))
    summary = run_summary(schedule, run_id, EXIT_VALIDATION, started, error, history)
    if summary["run_id"]:
        out.write(f"run {run_id} (opsrunner show {run_id})\n")
    _notify(schedule, summary, err, history)
    return EXIT_VALIDATION


def _request(schedule: Schedule, run_id: str, history: str) -> PlayRequest:
    from opsrunner import api

    return api.PlayRequest(schedule.playbook, inventory=schedule.inventory, extra_vars=schedule.extra_vars,
                           limit=schedule.limit, tags=schedule.tags, skip_tags=schedule.skip_tags, run_lock=True,
                           schedule=schedule.name, run_id=run_id,
                           history_path=str(history), argv=["play", *schedule.play_args(), "--lock"])


def _play(request: PlayRequest, out: IO[str], err: IO[str], failed: FailedTasks) -> tuple[int, str | None, bool]:
    """The schedule's play, reported on `out` as `opsrunner play` would; (exit code, why the
    run did not reach its recap, whether its `run ID` line was printed). However the run ends,
    there is an exit code and a why for the alert: the library masks what its errors say; of
    anything else only its type is told. The library records every way it ends in the history
    (before its play began too)."""
    from opsrunner.reporting import ConsoleReporter

    console = ConsoleReporter(out, 0, colour=False)
    code, why = _outcome(request, console, err, failed)
    return code, why, console.run_shown


def _outcome(request: PlayRequest, console: ConsoleReporter, err: IO[str],
             failed: FailedTasks) -> tuple[int, str | None]:
    from opsrunner import api

    try:
        return api.run(request, [console, failed]).exit_code, None
    except ValidationError as exc:
        for problem in exc.problems:
            err.write(f"ERROR: {problem}\n")
        return exit_code_of(exc), str(exc.problems[-1]) if exc.problems else None
    except OpsrunnerError as exc:
        err.write(f"ERROR: {exc}\n")
        return exit_code_of(exc), str(exc)
    except KeyboardInterrupt as exc:  # stopped before its first task (a run that began recaps itself)
        err.write("interrupted\n")
        return exit_code_of(exc), "interrupted before the play began"
    except Exception as exc:  # a bug: the traceback goes to the log, the alert still goes out
        traceback.print_exc(file=err)
        return exit_code_of(exc), f"unexpected {type(exc).__name__} (the traceback is in the run's log)"
    finally:
        _close(console, err)


def _close(console: ConsoleReporter, err: IO[str]) -> None:
    """The console's last lines written, where they can be. Through the CLI's stream
    (outstream.py) a full disk or a file-size limit never raises here; this stays for any other
    error of a stream (a descriptor closed under it) and a library caller's own stream: the
    run's alert and record still go out."""
    try:
        console.close()
    except OSError as exc:
        err.write(f"WARNING: the run's output could not be written: {exc}\n")


def run_summary(schedule: Schedule, run_id: str, code: int, started: float, error: str | None,
                history: str, failed: list[TaskRow] | None = None,
                kept: list[TaskRow] | None = None) -> dict[str, Any]:
    """The structured summary of the alert. What went wrong is what the run itself saw
    (`failed`: its failed task results, masked as the run masks its events), so the alert
    says it when the history could not record the run; so is what a run stopped part way or
    failed changed on its hosts (`changes`, from `kept`: FailedTasks.kept). The run's row, its
    schedule's previous outcome and its aborted runs come from the history, where it can be read."""
    summary: dict[str, Any] = {
        "schedule": schedule.name, "run_id": None, "playbook": schedule.playbook, "project": schedule.project,
        "exit_code": code, "result": result_of(code),
        "controller": socket.gethostname(), "started": started, "ended": time.time(), "git_commit": None,
        "recap": {}, "failed_tasks": [_failed_task(t) for t in failed or [] if t.status in ALERTED_STATUSES],
        "error": error, "previous_failed": None, "dashboard": schedule.dashboard, "aborted_unalerted": [],
        "unrecorded": None,
        "changes": run_changes(code, kept or []),
    }
    run = previous = None
    try:
        store = HistoryStore(history)
    except Exception as exc:  # unwritable, corrupt, locked: the summary says less, and why
        cause = scrub(f"{type(exc).__name__}: {str(exc).strip()}", history).splitlines()[0]
        summary["unrecorded"] = (f"run {run_id} NOT RECORDED: the run history {display(history)} cannot be "
                                 f"opened: {cause}")
    else:
        with contextlib.suppress(Exception):
            run = store.run(run_id)
            previous, aborted = _previous(store, schedule.name, run_id)
            summary["aborted_unalerted"] = [{"run_id": r.id, "started": r.started, "heartbeat": r.heartbeat,
                                             "task": r.current_task, "playbook": r.playbook,
                                             "changes": stopped_changes(r.tasks + killed_in(r)),
                                             "unrecorded": r.record_gap}
                                            for r in aborted]
        store.close()
    if previous is not None:
        summary["previous_failed"] = previous.exit_code != 0 if previous.exit_code is not None else previous.aborted
    if run is not None and run.id == run_id:
        summary.update(run_id=run.id, git_commit=run.git_commit, recap=run.recap, started=run.started,
                       ended=run.ended or summary["ended"], result=run.result)
        if run.record_gap:
            summary["unrecorded"] = f"record incomplete: {run.record_gap}"
    elif summary["unrecorded"] is None:
        summary["unrecorded"] = f"run {run_id} NOT RECORDED: it is not in the run history {display(history)}"
    if summary["failed_tasks"]:
        summary["error"] = None  # the tasks say it better than stderr's last line
    return summary


def _failed_task(t: TaskRow) -> dict[str, Any]:
    return {"host": t.host, "task": t.task, "status": t.status, "msg": t.msg, "diagnosis": t.diagnosis,
            "log_tail": t.log_tail, "stdout_tail": t.stdout_tail, "stderr_tail": t.stderr_tail}


#: The task results an alert lists as what went wrong.
ALERTED_STATUSES = FAILED_STATUSES
#: The note on an aborted run's row once a later run of its schedule has alerted it.
ALERTED_ABORTED = "alerted as aborted (controller gone) by run"


def _previous(store: HistoryStore, name: str, run_id: str) -> tuple[RunRow | None, list[RunRow]]:
    """The schedule's previous outcome (the run that ended last before this one; runs still
    going on have none yet), and the aborted runs (controller gone) that ended since its last
    run that closed, whose alert no run has sent yet, oldest first."""
    from opsrunner.schedule.lastruns import by_end

    ended = [r for r in by_end(store, name) if r.id != run_id and (r.exit_code is not None or r.aborted)]
    aborted = []
    for r in ended:
        if not r.aborted:
            break
        if not any(n.startswith(ALERTED_ABORTED) for n in r.notes):
            aborted.append(r)
    return (ended[0] if ended else None), aborted[::-1]


def _notify(schedule: Schedule, summary: dict[str, Any], err: IO[str], history: str) -> None:
    for aborted in summary["aborted_unalerted"] if schedule.notify else []:  # whatever notify_on: a failure
        notes = _deliver(schedule, aborted_alert(summary, aborted), err)
        if any(n.endswith(": sent") for n in notes):  # alerted once: the next run says it no more
            _note(history, aborted["run_id"], [f"{ALERTED_ABORTED} {summary['run_id'] or '(not recorded)'}"])
    if not schedule.notify or not should_notify(schedule.notify_on, summary["exit_code"], summary["previous_failed"]):
        return
    notes = _deliver(schedule, alert_for(summary), err)
    if summary["run_id"]:
        _note(history, summary["run_id"], notes)


def _note(history: str, run_id: str, notes: list[str]) -> None:
    with contextlib.suppress(Exception):  # recorded where possible, never fatal
        store = HistoryStore(history)
        for note in notes:
            store.add_note(run_id, note)
        store.close()


def _deliver(schedule: Schedule, alert: Alert, err: IO[str]) -> list[str]:
    """Send `alert` to every URL of the schedule; a note per URL (sent, or why not)."""
    notes = []
    for url in schedule.notify:
        try:
            problem = send(url, alert)
            shown = label(url)
        except Exception as exc:  # an alert never fails the run, whatever apprise does
            problem, shown = f"{type(exc).__name__}: {exc}", "(an alert URL)"
        note = f"alert to {shown}: " + ("sent" if problem is None else f"FAILED: {problem}")
        if problem is not None:
            err.write(f"WARNING: {note}\n")
        notes.append(note)
    return notes
