"""A task result as the history records it (TaskRow), made from the engine's TaskEnd; and
FailedTasks, a subscriber that keeps the failed ones of a run in memory (what a scheduled
run's alert says went wrong) and those that changed something or judged a change (what a
stopped run's alert says it left on its hosts), known whether or not the history could record
them."""

from __future__ import annotations

from collections.abc import Callable

from opsrunner.events import Event, TaskEnd, TaskStart, TaskTitles
from opsrunner.history.rows import TaskRow
from opsrunner.results import TaskResult

#: A failed task's output kept in its record: at most this many last lines of each stream...
OUTPUT_LINES = 20
#: ... and at most this many characters of them (a line of megabytes is cut to its end).
OUTPUT_CHARS = 4096
#: The task results that say what went wrong (what an alert lists).
FAILED_STATUSES = ("failed", "unreachable", "timed_out", "interrupted")
#: Modules whose results say whether a change was checked or undone (a launch verified, a
#: rollback run): kept, changed or not, for the alert of a run that stopped part way.
JUDGING_MODULES = ("verify", "rollback")
#: The keys of a rollback's data that an alert reads (TaskRow.facts): what it stopped and
#: started, the link it removed, why it failed.
FACTS = ("outcome", "pid", "stopped", "restored", "unlinked", "why")


def output_tail(text: str) -> str:
    """The last OUTPUT_LINES lines of `text`, at most OUTPUT_CHARS characters of them."""
    kept = "\n".join(text.rstrip("\n").splitlines()[-OUTPUT_LINES:])
    return kept if len(kept) <= OUTPUT_CHARS else "..." + kept[-(OUTPUT_CHARS - 3):]


def changed(r: TaskResult | TaskRow) -> bool:
    """Whether a result says it changed something on its host."""
    return bool(r.changed) or str(r.status) == "changed"


def _output_of(r: TaskResult) -> TaskResult:
    """The result whose output tells why the task failed: its own, else (a loop's summary has
    none) its last failed item's."""
    if r.stdout.strip() or r.stderr.strip() or not r.items:
        return r
    return next((i for i in reversed(r.items) if i.failed), r.items[-1])


def task_row(event: TaskEnd, title: str, mask: Callable[[str], str]) -> TaskRow:
    """The record of one result, masked with `mask`. A failed task's output tail is kept (a
    scheduled run's console output goes nowhere); a `no_log` result arrives censored, with
    no output to keep."""
    r = event.result
    out = _output_of(r) if r.failed and not r.no_log else TaskResult(r.status)
    return TaskRow(event.play, mask(title), event.module, event.host, str(r.status), r.changed, event.handler,
                   mask(r.msg), mask(str(r.data.get("diagnosis") or "")), round(r.duration_s, 3),
                   mask(str(r.data.get("log_tail") or "")), mask(output_tail(out.stdout)),
                   mask(output_tail(out.stderr)), _facts(event, mask))


def _facts(event: TaskEnd, mask: Callable[[str], str]) -> dict[str, object] | None:
    """A rollback's FACTS, its `why` masked as its message (none where that is censored)."""
    if event.module != "rollback":
        return None
    data = event.result.data
    facts = {key: data[key] for key in FACTS if key in data}
    if event.result.no_log:
        facts.pop("why", None)
    elif facts.get("why") is not None:
        facts["why"] = mask(str(facts["why"]))
    return facts


class FailedTasks:
    """Keeps the failed results of a run (`rows`) and (`kept`) every result that failed,
    changed something or comes from a JUDGING_MODULES module, in order (events arrive masked,
    no_log censored)."""

    def __init__(self) -> None:
        self.rows: list[TaskRow] = []
        self.kept: list[TaskRow] = []
        self._titles = TaskTitles()

    def handle(self, event: Event) -> None:
        if isinstance(event, TaskStart):
            self._titles.started(event)
        elif isinstance(event, TaskEnd):
            failed = str(event.result.status) in FAILED_STATUSES
            if failed or changed(event.result) or event.module in JUDGING_MODULES:
                row = task_row(event, self._titles.title(event), str)
                self.kept.append(row)
                if failed:
                    self.rows.append(row)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
