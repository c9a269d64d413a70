"""The check-mode ledger: what earlier tasks on one host *would* have done in a dry run.

In `--check` nothing changes on the target, so a later task would otherwise judge the host
as it is now (the old job still running) instead of as the run would leave it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckLedger:
    """Host-local; one per host per run, filled only in check mode."""

    would_stop: set[int] = field(default_factory=set)
    would_launch: list[str] = field(default_factory=list)
    #: Remote paths an earlier task would have created (deployed files; their directories too).
    would_create: list[str] = field(default_factory=list)

    def stopping_note(self) -> str:
        if not self.would_stop:
            return ""
        pids = ", ".join(str(p) for p in sorted(self.would_stop))
        return f" (after stopping pid {pids})"
