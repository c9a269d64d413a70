"""What a run that stopped part way (interrupted, terminated, its controller killed) or failed
(a task failed, a host unreachable) left on its hosts, for its alert: per host the tasks that
ended changed, the task cut short and what is known of it, a rollback that failed, and the
changes nothing checked or undid afterwards (a launch no verify passed after, an old job
stopped with no launch after it) where no rollback ran. Derived from the results the run
itself saw (for a run whose controller was killed, those its history kept), by what each
task's module is, never by the role's task names. Bounded: CHANGED_LINES changed tasks a
host, HOSTS hosts, then how many more."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from opsrunner.exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, EXIT_VALIDATION
from opsrunner.history.rows import TaskRow
from opsrunner.history.taskrows import FAILED_STATUSES, changed
from opsrunner.secrets import CENSORED

if TYPE_CHECKING:
    from opsrunner.history.rows import RunRow

#: Hosts an alert details; the others are counted.
HOSTS = 5
#: Changed tasks an alert names per host (the last ones: the host's state now is theirs).
CHANGED_LINES = 5
#: A line of a task's message is cut to this many characters.
LINE_CHARS = 200
_RAN = ("ok", "changed")
#: The results of a task that ended failing (interrupted is a task cut short, not failed).
_FAILED = ("failed", "unreachable", "timed_out")
#: Where a rollback's own part of its line begins: the line is `FAILED TASK failed: WHY; TEXT`
#: (modules/rollback.py's _result), TEXT one of its outcomes; the failed task is listed
#: already, and a long WHY would cut TEXT off.
_ROLLBACK_TEXT = re.compile(r"(?:^|; )((?:rolled back to |no rollback|would roll back |rollback ).*)$")
#: A rollback's outcome clause, before its reason (modules/rollback.py's outcome_text).
_OUTCOME = re.compile(r"rolled back to .*?, pid \S+, verified|rollback(?: to .*?)? failed(?: too)?: |no rollback: "
                      r"|no rollback needed: ")
#: The clause of a rollback that removed `current` (unlinked_text), and its short form.
_UNLINKED = re.compile(r"; current removed \((?P<link>.+?) pointed to (?P<was>release \S+|no release), which is "
                       r"not what runs: the last good run is a plain deploy's, not a release's\)")
_UNLINKED_SHORT = re.compile(r"; current removed \(.+? pointed to (?:release \S+|no release), which is not what runs\)")
#: How a rollback cut short says what it had done so far (modules/rollback.py's so_far): all
#: of it is what it did (each reason in it is bounded there), so it is never cut.
_SO_FAR = "rollback interrupted "
#: The characters of a rollback's reason kept however long the rest of its line.
_REASON_MIN = 60


#: What a task whose controller was killed in it may have done, by its module, where its record
#: holds no word of its own (interrupts.so_far) on that host: a rollback that started may have
#: stopped the job and relaunched another, so the launch before it is not what runs now.
_MAY_HAVE_DONE = {"rollback": "rollback cut short before it told what it had done: it may have stopped the job, "
                              "switched current and relaunched the last good run; what runs there now is not known "
                              "from the record"}


def killed_in(run: RunRow) -> list[TaskRow]:
    """The task a run whose controller is gone was in (RunRow.in_flight), as the results its
    record lacks: `interrupted` on each host it had not ended on, with what its module said it
    had done there so far (a stop, a launch, a rollback), else what a rollback may have done.
    Nothing for any other task: the alert names the task it was in, and it told nothing more."""
    flight, title = run.in_flight, run.current_task
    if not run.aborted or not flight or not title:
        return []
    so_far, own = flight.get("so_far") or {}, flight.get("tasks") or {}  # tasks: each host's, strategy free
    cut = []
    for host in flight.get("hosts") or []:
        task = own.get(host) or {"task": title, "module": flight.get("module")}
        module = str(task.get("module"))
        text = so_far.get(host) or _MAY_HAVE_DONE.get(module)
        last = next((r for r in reversed(run.tasks) if r.host == host), None)
        if text is None or (last is not None and (last.task, last.module) == (task.get("task"), module)):
            continue  # nothing known of it there, or it had ended there
        cut.append(TaskRow(play="", task=str(task.get("task")), module=module, host=host, status="interrupted",
                           changed=False, handler=False, msg=text, diagnosis="", duration=0.0))
    return cut


def run_changes(code: int, rows: list[TaskRow]) -> dict[str, Any] | None:
    """What the alert of a run that ended with exit `code` says it changed, from its kept
    results (FailedTasks.kept): a run stopped part way always; a failed one (exit 2) where a
    task failed or changed something; one that ended otherwise (a host unreachable, an
    error, a crash: exit 3, 1, 250) where a host was changed; None where nothing ran (bad
    input, bad options: a refused run keeps no result) or the run went well."""
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        return stopped_changes(rows)
    if code in (EXIT_OK, EXIT_VALIDATION, EXIT_USAGE):
        return None
    changes = stopped_changes(rows, failed=True)
    # exit 2 is Ansible's "a task failed" (results.py): the failed task is what it left
    touched = bool(changes["hosts"]) if code == 2 else any(h["changed"] for h in changes["hosts"])
    return changes if touched else None


def stopped_changes(rows: list[TaskRow], failed: bool = False) -> dict[str, Any]:
    """What the run changed, per host, from its kept results in order (FailedTasks.kept, or a
    run's task rows): {"hosts": [...], "more_hosts": N, "failed": failed}. A host is listed
    where a task changed something or was cut short (of a run that `failed`: or failed); those
    left with a change unchecked first, then those changed."""
    by_host: dict[str, list[TaskRow]] = {}
    for row in rows:
        by_host.setdefault(row.host, []).append(row)
    hosts = [h for h in (_host(host, rs) for host, rs in by_host.items())
             if h["changed"] or h["cut"] or (failed and h["failed"])]
    hosts.sort(key=lambda h: (not h["unchecked"], not h["changed"], not h["failed"]))  # stable otherwise
    for h in hosts:
        del h["failed"]
    return {"hosts": hosts[:HOSTS], "more_hosts": max(0, len(hosts) - HOSTS), "failed": failed}


def _host(host: str, rows: list[TaskRow]) -> dict[str, Any]:
    done = [r for r in rows if changed(r) and r.status != "interrupted"]
    cut = next((r for r in reversed(rows) if r.status == "interrupted"), None)
    rollback = next((r for r in reversed(rows) if r.module == "rollback" and r.status in _FAILED), None)
    return {"host": host, "changed": [_task(r) for r in done[-CHANGED_LINES:]],
            "earlier": max(0, len(done) - CHANGED_LINES), "cut": _task(cut) if cut else None,
            "rollback_failed": _task(rollback) | {"status": rollback.status.upper()} if rollback else None,
            "unchecked": _unchecked(rows), "failed": any(r.status in _FAILED for r in rows)}


def _task(row: TaskRow) -> dict[str, str]:
    msg = "its output is hidden (no_log)" if row.msg == CENSORED else (row.msg.splitlines() or [row.status])[0]
    return {"task": row.task, "msg": _rollback_text(msg, row.facts) if row.module == "rollback" else _cut(msg)}


def _rollback_text(line: str, facts: dict[str, Any] | None = None) -> str:
    """A rollback's line without the failed task it names first (the alert lists that task),
    bounded by cutting its reason (why it failed, a warning), never what it did: `rolled back
    to ..., pid N, verified`, `current removed (...)` and its end, what runs now (`; nothing
    is running`), stay whole; so does what one cut short had done so far."""
    own = _ROLLBACK_TEXT.search(line)
    text = own.group(1) if own else line
    if len(text) <= LINE_CHARS or text.startswith(_SO_FAR):
        return text
    text = _UNLINKED.sub(r"; current removed (\g<link> pointed to \g<was>, which is not what runs)", text)
    head = _OUTCOME.match(text)
    start = head.end() if head else 0
    why = str((facts or {}).get("why") or "")
    at = text.find(why, start) if why else -1
    if at >= 0:  # the reason is known: cut it alone
        start, end = at, at + len(why)
    else:  # up to the removed link, or (not known where it ends) its middle
        unlinked = _UNLINKED_SHORT.search(text, start)
        end = unlinked.start() if unlinked else -1
    room = max(_REASON_MIN, LINE_CHARS - (len(text) - ((end if end >= 0 else len(text)) - start)))
    reason = text[start:end] if end >= 0 else text[start:]
    if len(reason) <= room:
        return text
    if end >= 0:
        return text[:start] + reason[:room].rstrip() + " ..." + text[end:]
    half = room // 2
    return text[:start] + reason[:half].rstrip() + " ... " + reason[-half:].lstrip()


def _unchecked(rows: list[TaskRow]) -> list[str]:
    """The changes of this host that nothing after them checked or undid: a launch that no
    verify passed after, an old job stopped that no launch followed; none where a rollback ran."""
    launch = _last(rows, "launch_detached")
    stop = _last(rows, "kill_old")
    notes = []
    verifies = [r for r in rows[launch + 1:] if r.module == "verify"] if launch is not None else []
    failed_verify = next((r for r in verifies if r.status in _FAILED), None)
    if launch is None or any(r.status in _RAN for r in verifies):
        pass
    elif failed_verify is not None:  # checked, and found bad (dead, hung): it is left so
        notes.append(f"LAUNCHED, FAILED VERIFY: what '{rows[launch].task}' launched failed "
                     f"'{failed_verify.task}': {_why(failed_verify)}")
    else:
        notes.append(f"LAUNCHED, NOT VERIFIED: what '{rows[launch].task}' launched runs unchecked: "
                     "no verify passed after it")
    if stop is not None and (launch is None or launch < stop):
        notes.append(f"OLD JOB STOPPED, NOTHING LAUNCHED: '{rows[stop].task}' stopped it and no launch "
                     "ended after it")
    first = min(i for i in (launch, stop, len(rows)) if i is not None)
    rollbacks = [r for r in rows[first + 1:] if r.module == "rollback"]
    if not notes or any(changed(r) or (r.status in FAILED_STATUSES and _acted(r)) for r in rollbacks):
        return []  # a rollback that did something (or may have: cut short, failed) says so itself
    why = next((_rollback_text(r.msg.splitlines()[0], r.facts) for r in rollbacks if r.msg and r.msg != CENSORED), "")
    return [f"{note}; no rollback ran" + (f" ({why})" if why else "") for note in notes]


def _acted(row: TaskRow) -> bool:
    """Whether a rollback that did not succeed stopped or started something, or may have: its
    data shows it (a refused one, its job lock held or its release changed in place, has
    stopped nothing); a rollback with no data (read from the history, cut short, its target
    not answering) is taken to have acted, and its own line says what is known."""
    facts = row.facts
    if facts is None or "outcome" not in facts:
        return True
    return bool(facts.get("stopped") or facts.get("pid") is not None or facts.get("restored")
                or facts.get("unlinked"))


def _why(row: TaskRow) -> str:
    """What a failed task found, in a line: its diagnosis, else its message's first line."""
    if row.msg == CENSORED:
        return "its output is hidden (no_log)"
    return _cut((row.diagnosis or row.msg).splitlines()[0] if (row.diagnosis or row.msg).strip() else row.status)


def _last(rows: list[TaskRow], module: str) -> int | None:
    return next((i for i in range(len(rows) - 1, -1, -1) if rows[i].module == module and changed(rows[i])), None)


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..."


def changes_lines(changes: dict[str, Any], run_id: str | None, recorded_only: bool = False) -> list[str]:
    """The alert's lines of stopped_changes(): per host what ended changed, the task cut short,
    a rollback that failed and the changes left unchecked; or that no task had changed anything.
    `recorded_only`: the results are what a killed controller's history kept, which may lack its
    last ones (the alert says from when): said so, never "what the run changed" or "no task had
    changed anything"."""
    ended = "failed" if changes.get("failed") else "stopped"
    if not changes["hosts"]:
        if recorded_only:
            return [f"before it {ended}, no task recorded had changed anything on any host"]
        return [f"before it {ended}, no task had changed anything on any host"]
    what = "what its record shows it changed" if recorded_only else "what the run changed"
    lines = [f"{what} before it {ended} (the hosts are left so):"]
    for host in changes["hosts"]:
        lines.append(f"[{host['host']}]")
        if host["earlier"]:
            lines.append(f"  ({host['earlier']} earlier changed task(s) not shown)")
        lines += [f"  changed: {t['task']}: {t['msg']}" for t in host["changed"]]
        if not host["changed"]:
            which = "task recorded" if recorded_only else "task"
            lines.append(f"  nothing: no {which} had ended changed on {host['host']}")
        if host["cut"]:
            lines.append(f"  cut short: {host['cut']['task']}: {host['cut']['msg']}")
        if host.get("rollback_failed"):  # what it stopped or started is in its line
            failed = host["rollback_failed"]
            lines.append(f"  rollback {failed['status']}: {failed['task']}: {failed['msg']}")
        lines += [f"  {note}" for note in host["unchecked"]]
    if changes["more_hosts"]:
        where = f" (opsrunner show {run_id})" if run_id else ""
        how = "changed or failed" if changes.get("failed") else "changed or cut short"
        lines.append(f"and {changes['more_hosts']} more host(s) {how}{where}")
    return lines
