"""What the dashboard shows, as plain JSON-ready dicts: the pages and the JSON API render
the same ones. Everything comes from the history database (already masked when recorded)
and goes through secrets.py's masking once more, so no page shows what `opsrunner history`
and `opsrunner show` would not."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path
from typing import Any

from opsrunner.extravars import masked_argv
from opsrunner.history.store import HistoryStore, HostVerdict, RunFilter, RunRow, TaskRow
from opsrunner.secrets import Masker

#: Runs per page of `/` and `/api/runs`.
PAGE_SIZE = 50
#: How many of the latest runs the hosts page reads its verdicts from.
HOSTS_SCAN = 5000


def when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else ""


def _masked_command(command: str, masker: Masker) -> str:
    try:
        return shlex.join(masked_argv(shlex.split(command), masker))
    except ValueError:  # not a shell word list (cannot happen for recorded runs): masked as text
        return masker.mask(command)


def run_summary(run: RunRow) -> dict[str, Any]:
    """One line of the runs list."""
    return {
        "id": run.id, "started": when(run.started), "started_ts": run.started, "ended": when(run.ended),
        "duration_s": None if run.ended is None else round(run.ended - run.started, 3),
        "result": run.result, "label": run.label, "exit_code": run.exit_code, "dry_run": run.check_mode,
        "playbook": Path(run.playbook).name, "playbook_path": run.playbook, "schedule": run.schedule,
        "hosts": run.hosts, "git_commit": run.git_commit, "git_dirty": run.git_dirty,
        "run_group": run.run_group, "slice": run.slice,
    }


def _task(task: TaskRow) -> dict[str, Any]:
    shown, log_header = shown_msg(task)
    return {"play": task.play, "task": task.task, "module": task.module, "host": task.host, "status": task.status,
            "changed": task.changed, "handler": task.handler, "msg": task.msg, "diagnosis": task.diagnosis,
            "shown_msg": shown, "log_header": log_header,
            "log_tail": task.log_tail, "stdout_tail": task.stdout_tail, "stderr_tail": task.stderr_tail,
            "duration_s": task.duration}


def shown_msg(task: TaskRow) -> tuple[str, str]:
    """A task's message as its page shows it, without what the page shows beside it, styled:
    its `diagnosis: ...` line and its log's last lines (the `  | ` lines), where the message
    holds exactly those (a failed verify's does); and the `last lines of LOG:` line that names
    the log, which the page puts over them ("" where they stay in the message). The API keeps
    the message as recorded (`msg`); `show` prints that alone."""
    msg = task.msg
    if task.diagnosis and f"\ndiagnosis: {task.diagnosis}" in msg:
        msg = msg.replace(f"\ndiagnosis: {task.diagnosis}", "", 1)
    lines = msg.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("last lines of ") and line.endswith(":")), None)
    if task.log_tail and start is not None:
        end = start + 1
        while end < len(lines) and lines[end].startswith("  | "):
            end += 1
        if [line[4:] for line in lines[start + 1:end]] == task.log_tail.splitlines():
            return "\n".join(lines[:start] + lines[end:]), lines[start]
    return msg, ""


def run_detail(run: RunRow) -> dict[str, Any]:
    """A run's page: its configuration, recap and every task per host."""
    masker = Masker()  # the default secret names: hides again what the recorder hid (idempotent)
    options = masker.mask_value(run.options)
    by_host: dict[str, list[dict[str, Any]]] = {h: [] for h in run.hosts}
    for task in run.tasks:
        by_host.setdefault(task.host, []).append(_task(task))
    return {
        **run_summary(run), "user": run.user, "controller": run.controller,
        "command": _masked_command(run.command, masker), "cwd": run.cwd,
        "extra_vars": masker.mask_vars(run.extra_vars), "limit": options.get("limit"),
        "tags": options.get("tags", []), "skip_tags": options.get("skip_tags", []),
        "inventory": run.inventory, "reason": masker.mask(run.reason) if run.reason else None,
        "record_gap": masker.mask(run.record_gap) if run.record_gap else None,
        # the page lists notes: why the run ended (bad input, a refusal, an error) and what its
        # record lacks head them
        "notes": [masker.mask(f"{head}: {text}") for head, text in (("ended", run.reason),
                                                                    ("record incomplete", run.record_gap)) if text]
        + [masker.mask(n) for n in run.notes],
        "current_task": run.current_task if run.exit_code is None else None,
        # its controller is gone: the page says it `was in` its task (as `show`), not `now in`
        "aborted": run.aborted,
        "recap": run.recap, "tasks": by_host, "finished": run.exit_code is not None or run.aborted,
    }


def runs_page(store: HistoryStore, filters: RunFilter, page: int) -> dict[str, Any]:
    """A page of runs, newest first; one more is read to know whether an older page exists."""
    rows = store.runs(filters.playbook, filters.host, schedule=filters.schedule, result=filters.result,
                      limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
    return {"page": page, "page_size": PAGE_SIZE, "has_older": len(rows) > PAGE_SIZE,
            "filters": {k: v for k, v in filters.__dict__.items() if v and k != "failed"},
            "runs": [run_summary(r) for r in rows[:PAGE_SIZE]]}


def durations(store: HistoryStore) -> list[dict[str, Any]]:
    """Per playbook, the durations of its latest finished runs (the runs page's chart)."""
    return [{"playbook": Path(playbook).name, "playbook_path": playbook,
             "points": [{"id": i, "started": when(s), "duration_s": round(d, 3)} for i, s, d in points]}
            for playbook, points in store.durations().items()]


def _verdict(v: HostVerdict | None) -> dict[str, Any] | None:
    """A verdict; of an aborted run (its controller gone), `counts` are its recorded results',
    and `recorded` says them (`its record shows ok=3 changed=2 failed=1`)."""
    if v is None:
        return None
    shown = " ".join(f"{k}={n}" for k, n in v.counts.items() if n) or "no result"
    return {"verdict": v.verdict, "run_id": v.run_id, "started": when(v.started), "counts": v.counts,
            "aborted": v.aborted, "recorded": f"its record shows {shown}" if v.aborted else None}


def hosts(store: HistoryStore) -> list[dict[str, Any]]:
    """Per host and playbook, the verdict of its latest real run (None where it has only dry
    runs) and, under `dry_run`, the latest dry run (`--check`) newer than it: a dry run
    changed nothing, so it never replaces a real run's verdict."""
    found = []
    for state in store.host_verdicts(HOSTS_SCAN):
        real = _verdict(state.verdict) or {"verdict": None, "run_id": None, "started": "", "counts": None,
                                           "aborted": False, "recorded": None}
        found.append({"host": state.host, "playbook": Path(state.playbook).name, "playbook_path": state.playbook,
                      **real, "dry_run": _verdict(state.dry_run)})
    return found


def schedules(store: HistoryStore, history: Path | str, folder: Path) -> list[dict[str, Any]]:
    """Every schedule, the next to run first (inactive timers last): its calendar, timer and
    last run, read from the run history its runs are recorded in (`store`, open on the
    dashboard's `history`, for those that name none or the same). Each other history is
    opened once; one that cannot be read is said on its schedules' rows (`history_error`).
    Alert URLs are not shown (a webhook URL is a credential)."""
    from opsrunner.schedule import store as schedule_store
    from opsrunner.schedule.commands import next_run
    from opsrunner.schedule.lastruns import LastRuns, same_history
    from opsrunner.schedule.units import timer_active

    served = str(history)
    histories = LastRuns(served, served, read_only=True, opened={served: store})
    found = []
    try:
        for listed in schedule_store.scan(folder):  # a file that does not load is listed with why
            s = listed.schedule
            active = timer_active(s)
            last = histories.last(s)
            found.append({
                "name": s.name, "calendar": s.cron or s.on_calendar, "every": s.every, "playbook": s.playbook,
                "project": s.project, "installer": s.installer, "timer_active": active,
                "next_run": next_run(s) if active else "", "notify_on": s.notify_on,
                "alert_channels": len(s.notify), "last_run": run_summary(last.run) if last.run else None,
                # where its runs are recorded; its runs' pages are this dashboard's only if it serves it
                "history": last.shown, "history_served": same_history(last.location) == same_history(served),
                "history_error": last.error, "history_missing": last.missing, "error": listed.error,
            })
    finally:
        histories.close()
    return sorted(found, key=lambda s: (not s["next_run"], s["next_run"], s["name"]))
