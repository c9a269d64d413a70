"""What a run that stopped part way (interrupted, terminated, its controller killed) left on
its hosts, for its alert: per host the tasks that ended changed, the task cut short and what
is known of it, and the changes nothing checked or undid afterwards (a launch no verify passed
after, an old job stopped with no launch after it) where no rollback ran. Derived from the
results the run itself saw (for a run whose controller was killed, those its history kept),
by what each task's module is, never by the role's task names. Bounded: CHANGED_LINES changed
tasks a host, HOSTS hosts, then how many more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.history.taskrows import FAILED_STATUSES, changed
from opsrunner.secrets import CENSORED

if TYPE_CHECKING:
    from opsrunner.history.rows import TaskRow

#: Hosts an alert details; the others are counted.
HOSTS = 5
#: Changed tasks an alert names per host (the last ones: the host's state now is theirs).
CHANGED_LINES = 5
#: A line of a task's message is cut to this many characters.
LINE_CHARS = 200
_RAN = ("ok", "changed")


def stopped_changes(rows: list[TaskRow]) -> dict[str, Any]:
    """What the run changed, per host, from its kept results in order (FailedTasks.kept, or a
    run's task rows): {"hosts": [...], "more_hosts": N}. A host is listed where a task changed
    something or was cut short; those left with a change unchecked first."""
    by_host: dict[str, list[TaskRow]] = {}
    for row in rows:
        by_host.setdefault(row.host, []).append(row)
    hosts = [h for h in (_host(host, rs) for host, rs in by_host.items()) if h["changed"] or h["cut"]]
    hosts.sort(key=lambda h: (not h["unchecked"], not h["changed"]))  # stable: in the run's order otherwise
    return {"hosts": hosts[:HOSTS], "more_hosts": max(0, len(hosts) - HOSTS)}


def _host(host: str, rows: list[TaskRow]) -> dict[str, Any]:
    done = [r for r in rows if changed(r) and r.status != "interrupted"]
    cut = next((r for r in reversed(rows) if r.status == "interrupted"), None)
    return {"host": host, "changed": [_task(r) for r in done[-CHANGED_LINES:]],
            "earlier": max(0, len(done) - CHANGED_LINES), "cut": _task(cut) if cut else None,
            "unchecked": _unchecked(rows)}


def _task(row: TaskRow) -> dict[str, str]:
    msg = "its output is hidden (no_log)" if row.msg == CENSORED else (row.msg.splitlines() or [row.status])[0]
    return {"task": row.task, "msg": _cut(msg)}


def _unchecked(rows: list[TaskRow]) -> list[str]:
    """The changes of this host that nothing after them checked or undid: a launch that no
    verify passed after, an old job stopped that no launch followed; none where a rollback ran."""
    launch = _last(rows, "launch_detached")
    stop = _last(rows, "kill_old")
    notes = []
    if launch is not None and not any(r.module == "verify" and r.status in _RAN for r in rows[launch + 1:]):
        notes.append(f"LAUNCHED, NOT VERIFIED: what '{rows[launch].task}' launched runs unchecked: "
                     "no verify passed after it")
    if stop is not None and (launch is None or launch < stop):
        notes.append(f"OLD JOB STOPPED, NOTHING LAUNCHED: '{rows[stop].task}' stopped it and no launch "
                     "ended after it")
    first = min(i for i in (launch, stop, len(rows)) if i is not None)
    rollbacks = [r for r in rows[first + 1:] if r.module == "rollback"]
    if not notes or any(changed(r) or r.status in FAILED_STATUSES for r in rollbacks):
        return []  # a rollback that did something (or was cut short, or failed) says so itself
    why = next((_cut(r.msg.splitlines()[0]) for r in rollbacks if r.msg and r.msg != CENSORED), "")
    return [f"{note}; no rollback ran" + (f" ({why})" if why else "") for note in notes]


def _last(rows: list[TaskRow], module: str) -> int | None:
    return next((i for i in range(len(rows) - 1, -1, -1) if rows[i].module == module and changed(rows[i])), None)


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..."


def changes_lines(changes: dict[str, Any], run_id: str | None) -> list[str]:
    """The alert's lines of stopped_changes(): per host what ended changed, the task cut short
    and the changes left unchecked; or that no task had changed anything."""
    if not changes["hosts"]:
        return ["before it stopped, no task had changed anything on any host"]
    lines = ["what the run changed before it stopped (the hosts are left so):"]
    for host in changes["hosts"]:
        lines.append(f"[{host['host']}]")
        if host["earlier"]:
            lines.append(f"  ({host['earlier']} earlier changed task(s) not shown)")
        lines += [f"  changed: {t['task']}: {t['msg']}" for t in host["changed"]]
        if not host["changed"]:
            lines.append(f"  nothing: no task had ended changed on {host['host']}")
        if host["cut"]:
            lines.append(f"  cut short: {host['cut']['task']}: {host['cut']['msg']}")
        lines += [f"  {note}" for note in host["unchecked"]]
    if changes["more_hosts"]:
        where = f" (opsrunner show {run_id})" if run_id else ""
        lines.append(f"and {changes['more_hosts']} more host(s) changed or cut short{where}")
    return lines
