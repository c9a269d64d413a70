"""What the history records of a run, as readers get it: plain rows, no database here
(store.py reads and writes them; outcomes.py keeps one aside when the database cannot)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsrunner.history.liveness import GONE, ControllerStamp

#: What an exit code says, as Ansible's: 1 an error (no host to target among them), 2 a task
#: failed, 3 a host unreachable, 4 bad input found before any host was touched, 5 bad options.
EXIT_RESULTS = {0: "ok", 1: "error", 2: "failed", 3: "unreachable", 4: "bad input", 5: "bad options",
                99: "interrupted", 143: "terminated"}


def result_of(exit_code: int, outcome: str | None = None) -> str:
    """The result word of a run that ended: what the controller recorded it as (`outcome`:
    "refused", "no hosts"), else what its exit code says."""
    return outcome or EXIT_RESULTS.get(exit_code, "error")


@dataclass
class TaskRow:
    play: str
    task: str
    module: str
    host: str
    status: str
    changed: bool
    handler: bool
    msg: str
    diagnosis: str
    duration: float
    #: The last lines of the job's log that a failed verify (or launch) saw.
    log_tail: str = ""
    #: A failed task's output: the last lines of its stdout and stderr (taskrows.py bounds
    #: them), masked; empty for a task that did not fail and for a no_log one.
    stdout_tail: str = ""
    stderr_tail: str = ""
    #: What an alert reads of the result's data (a rollback's outcome, pid, stopped, restored,
    #: unlinked, why: taskrows.FACTS), for a row the run kept in memory; None for a row read
    #: from the history, which does not record it (nor does as_dict() show it).
    facts: dict[str, Any] | None = None


@dataclass
class RunRow:
    id: str
    started: float
    ended: float | None = None
    user: str = ""
    controller: str = ""
    command: str = ""
    cwd: str = ""
    playbook: str = ""
    git_commit: str | None = None
    git_dirty: bool | None = None
    inventory: list[str] = field(default_factory=list)
    extra_vars: dict[str, Any] = field(default_factory=dict)
    schedule: str | None = None
    exit_code: int | None = None
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    heartbeat: float | None = None
    #: A dry run (`--check`): nothing was changed.
    check_mode: bool = False
    #: The run's options as the command line gave them: limit, tags, skip_tags, diff, forks.
    options: dict[str, Any] = field(default_factory=dict)
    #: The task an unfinished run is in (its hosts' last TaskStart), for a run that never ends.
    current_task: str | None = None
    #: The run group that ties the slices of one logical run together (docs/scale-out.md).
    run_group: str | None = None
    #: This run's slice of the hosts, "I/N" (`play --slice`), or None: every host.
    slice: str | None = None
    controller_stamp: ControllerStamp | None = None
    #: Why a run ended without its recap (its error, masked), None for a run that reached it.
    reason: str | None = None
    #: What happened where the exit code alone would mislead: "refused" (a run lock held, a
    #: dirty checkout: nothing ran), "no hosts" (nothing to target); None: as the exit code says.
    outcome: str | None = None
    #: What the record of a run that ended lacks, and why: its history could not be written
    #: during it (a full disk); its end was recorded later (outcomes.py). Of a run whose
    #: controller is gone (set by the reader): from when its results may be missing
    #: (liveness.unrecorded_after). None: complete.
    record_gap: str | None = None
    #: Set by the reader: an unfinished run whose controller is gone (liveness.py).
    aborted: bool = False
    #: Of an unfinished run, the task it is in beside its title (current_task): {"module": ...,
    #: "hosts": [...], "so_far": {host: what its module said it had done there so far}}, and
    #: under strategy free "tasks": {host: {"task": title, "module": ...}}, each host's own.
    #: (interrupts.so_far); {} where none is recorded (an older controller's row).
    in_flight: dict[str, Any] = field(default_factory=dict)

    @property
    def result(self) -> str:
        if self.exit_code is None:
            return GONE if self.aborted else "running"
        return result_of(self.exit_code, self.outcome)

    @property
    def label(self) -> str:
        """The result as people read it (the dashboard's labels, docs/dashboard.md): ok, failed
        (exit 2), bad input (exit 4), refused (exit 2), running, aborted (controller gone), dry
        run, and `, record incomplete` after a run whose history failed during it."""
        if self.exit_code is None:
            text = GONE if self.aborted else "running"
        else:
            text = "ok" if self.exit_code == 0 else f"{self.result} (exit {self.exit_code})"
        if self.check_mode:
            text = "dry run" if text == "ok" else f"dry run {text}"
        return text + (", record incomplete" if self.record_gap and self.exit_code is not None else "")

    @property
    def hosts(self) -> list[str]:
        """The run's hosts: its recap's, or for a run that never reached it, those of its task rows."""
        return list(self.recap) or sorted({t.host for t in self.tasks})

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("tasks", "controller_stamp", "aborted")}
        stamp = self.controller_stamp
        data["controller_pid"] = stamp.pid if stamp else None
        data["result"] = self.result
        data["label"] = self.label
        data["tasks"] = [{k: v for k, v in t.__dict__.items() if k != "facts"} for t in self.tasks]
        return data


RUN_COLUMNS = ("id", "started", "ended", "user", "controller", "command", "cwd", "playbook", "git_commit",
                "git_dirty", "inventory", "extra_vars", "schedule", "exit_code", "recap", "notes", "heartbeat",
                "current_task", "check_mode", "options", "run_group", "slice", "reason", "outcome",
                "record_gap", "in_flight")
STAMP_COLUMNS = ("controller_pid", "controller_start", "controller_machine")



#: What `result` filters on (`history --result`, the dashboard's filter).
RESULTS = ("ok", "failed", "unfinished", "dry-run")


@dataclass(frozen=True)
class RunFilter:
    playbook: str | None = None
    host: str | None = None
    schedule: str | None = None
    result: str | None = None
    failed: bool = False
    group: str | None = None

    @property
    def not_ok(self) -> bool:
        """`history --failed` and the dashboard's result=failed: one definition (did_not_succeed)."""
        return self.failed or self.result == "failed"


#: The rows did_not_succeed() may hold, in SQL: an open row is one only once its controller is gone.
NOT_OK_SQL = "(exit_code IS NULL OR exit_code != 0)"


def did_not_succeed(run: RunRow) -> bool:
    """A run that did not succeed: it exited other than 0, or never ended, its controller gone
    (aborted). A run going on has not failed (yet)."""
    return run.exit_code != 0 if run.exit_code is not None else run.aborted


def matches(run: RunRow, f: RunFilter) -> bool:
    """Whether a run passes a filter as the store's SQL would: for a run read from elsewhere
    than the database (its end kept aside, outcomes.py)."""
    by_result = {"ok": run.exit_code == 0 and not run.check_mode, "unfinished": run.exit_code is None,
                 "dry-run": run.check_mode}
    return ((not f.playbook or run.playbook == f.playbook or run.playbook.endswith("/" + f.playbook))
            and (not f.host or f.host in run.hosts) and (not f.schedule or run.schedule == f.schedule)
            and (not f.group or run.run_group == f.group) and (not f.not_ok or did_not_succeed(run))
            and by_result.get(f.result or "", True))


@dataclass(frozen=True)
class HostVerdict:
    host: str
    playbook: str
    run_id: str
    started: float
    counts: dict[str, int]
    #: The line of a dry run (`--check`): never a host's verdict, shown beside it.
    check_mode: bool = False
    #: The run never ended, its controller gone: `counts` are those of its recorded results.
    aborted: bool = False

    @property
    def verdict(self) -> str:
        if self.aborted:
            return "aborted"
        if self.counts.get("unreachable"):
            return "unreachable"
        return "failed" if self.counts.get("failed") else "ok"


@dataclass(frozen=True)
class HostState:
    """A host's state for one playbook (the dashboard's hosts page): the recap line of its
    latest real run, and that of a dry run newer than it. A dry run changed nothing, so it
    never stands for the host's state; a host with only dry runs has no verdict (None)."""

    host: str
    playbook: str
    verdict: HostVerdict | None
    dry_run: HostVerdict | None = None


def row_fields(run: RunRow, stamp: ControllerStamp | None) -> dict[str, Any]:
    """A row's columns as a JSON-ready dict: what a run keeps of itself aside (outcomes.py)."""
    fields = {c: getattr(run, c) for c in RUN_COLUMNS}
    return fields | dict(zip(STAMP_COLUMNS, [stamp.pid, stamp.start_ticks, stamp.machine] if stamp else [None] * 3,
                             strict=True))


def stamp_of(pid: int | None, start: int | None, machine: str | None) -> ControllerStamp | None:
    """The controller stamp of a row's columns (None: a row of a version that had none)."""
    return ControllerStamp(pid, start, machine or "") if pid else None
