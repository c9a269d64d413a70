"""Typed results: of one command, of one task on one host, and of a whole run."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(enum.StrEnum):
    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNREACHABLE = "unreachable"
    TIMED_OUT = "timed_out"
    #: The run was interrupted (Ctrl-C, SIGTERM) while the task ran on the host: what it did
    #: there is what its message says, or not known. Counted as failed in the recap.
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class CommandResult:
    """What one command on a host did. Output is kept as bytes; text views decode leniently."""

    command: str
    rc: int
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    duration_s: float = 0.0
    timed_out: bool = False
    #: Warnings the target side reported (e.g. a background child that held the output).
    warnings: tuple[str, ...] = ()

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode("utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


def tail(text: str, lines: int = 20) -> str:
    parts = text.splitlines()
    return "\n".join(parts[-lines:])


@dataclass
class TaskResult:
    """The outcome of one task (or one loop item) on one host."""

    status: Status
    msg: str = ""
    changed: bool = False
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""
    diff: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    ignored: bool = False
    check_mode_unsupported: bool = False
    items: list[TaskResult] = field(default_factory=list)
    item: Any = None
    warnings: list[str] = field(default_factory=list)
    #: The task ran with `no_log`: outputs show only its outcome (see secrets.censor).
    no_log: bool = False
    label: Any = None  # loop_control.label: what the console shows for the item

    @property
    def failed(self) -> bool:
        return self.status in (Status.FAILED, Status.TIMED_OUT, Status.UNREACHABLE, Status.INTERRUPTED)

    def registered(self) -> dict[str, Any]:
        """The view a later task sees through `register:` (Ansible's field names)."""
        view: dict[str, Any] = dict(self.data)
        if self.status == Status.SKIPPED and not self.items:
            # As ansible-core: a skipped task ran nothing, so it has no rc/stdout to read.
            view.update(status=str(self.status), changed=False, skipped=True, skip_reason=self.msg)
            return view
        view.update(
            status=str(self.status),
            changed=self.changed,
            failed=self.failed,
            skipped=self.status == Status.SKIPPED,
            timed_out=self.status == Status.TIMED_OUT,
            unreachable=self.status == Status.UNREACHABLE,
            msg=self.msg,
            rc=self.rc,
            stdout=self.stdout,
            stderr=self.stderr,
            stdout_lines=self.stdout.splitlines(),
            stderr_lines=self.stderr.splitlines(),
        )
        if self.items:
            view["results"] = [r.item_view() for r in self.items]
        return view

    def item_view(self) -> dict[str, Any]:
        """One loop item's entry in `results`: as ansible-core, only a skipped item says `skipped`."""
        view = self.registered() | {"item": self.item}
        if self.status != Status.SKIPPED:
            view.pop("skipped", None)
        return view


@dataclass
class HostStats:
    """PLAY RECAP counters for one host."""

    ok: int = 0
    changed: int = 0
    unreachable: int = 0
    failed: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0

    def count(self, result: TaskResult) -> None:
        if result.status == Status.UNREACHABLE and not result.ignored:
            self.unreachable += 1
        elif result.status == Status.SKIPPED:
            self.skipped += 1
        elif result.failed and result.ignored:
            self.ignored += 1
            self.ok += 1
            self.changed += int(result.changed)  # as ansible-core: an ignored failure may have changed
        elif result.failed:
            self.failed += 1
        else:
            self.ok += 1
            if result.changed:
                self.changed += 1

    def as_dict(self) -> dict[str, int]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "unreachable": self.unreachable,
            "failed": self.failed,
            "skipped": self.skipped,
            "rescued": self.rescued,
            "ignored": self.ignored,
        }


@dataclass
class RunSummary:
    """The whole run: per-host counters and whether it was interrupted."""

    stats: dict[str, HostStats] = field(default_factory=dict)
    interrupted: bool = False
    #: What interrupted the run: "SIGINT" (Ctrl-C) or "SIGTERM".
    signal: str = ""
    #: The tasks the interruption cut short, as (host, task title): recorded `interrupted`.
    in_flight: list[tuple[str, str]] = field(default_factory=list)

    def host(self, name: str) -> HostStats:
        return self.stats.setdefault(name, HostStats())

    def exit_code(self) -> int:
        """Ansible's exit codes: 99 interrupted (Ctrl-C; 143 for SIGTERM), 2 failures,
        3 unreachable, 0 otherwise."""
        if self.interrupted:
            return 143 if self.signal == "SIGTERM" else 99
        if any(s.failed for s in self.stats.values()):
            return 2
        if any(s.unreachable for s in self.stats.values()):
            return 3
        return 0
