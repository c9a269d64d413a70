"""Who holds a lock: the record a run writes into the run lock's file and hands to the job
lock's keeper, and the words a run that finds a lock taken shows for it."""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

#: What a run that finds a lock taken says when the record is empty or unreadable.
NOT_WRITTEN_YET = "another run (its holder record is not written yet)"


@lru_cache(maxsize=1)
def process_started() -> float:
    """When this process started (epoch seconds), from /proc; now where /proc is missing.
    Computed once: each computation differs by a few ms (uptime and clock are read apart),
    and both locks of one run must name the same start."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _number(value: object) -> float | None:
    try:
        return float(value) if isinstance(value, (int, float, str)) else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LockHolder:
    """The run holding a lock. As JSON (`record()`) it is the content of the run lock's file
    and of the job lock's file on the target, where the keeper adds its own pid and start."""

    #: The host name of the controller the run runs on.
    controller: str
    user: str
    pid: int
    playbook: str
    #: When the run's process started (epoch seconds); None where a record does not say.
    started: float | None
    #: The run's id in the history (None for a run that is not recorded).
    run_id: str | None = None

    @classmethod
    def this_run(cls, playbook: str, run_id: str | None = None) -> LockHolder:
        return cls(controller=socket.gethostname(), user=_user(), pid=os.getpid(), playbook=playbook,
                   started=round(process_started(), 3), run_id=run_id)

    @classmethod
    def from_record(cls, record: object) -> LockHolder | None:
        """The holder a lock file or a keeper's reply names; None for an empty record or one
        without a pid (a holder that has not written it yet). Keys it does not know are left."""
        if not isinstance(record, Mapping) or "pid" not in record:
            return None
        pid = _number(record["pid"])
        if pid is None:
            return None
        run_id = record.get("run_id")
        return cls(controller=str(record.get("controller", "?")), user=str(record.get("user", "?")),
                   pid=int(pid), playbook=str(record.get("playbook", "?")), started=_number(record.get("started")),
                   run_id=str(run_id) if run_id else None)

    def record(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """`alice@ctl (opsrunner pid 4242, playbook restart.yml, started 2026-12-01 01:02:03 UTC)`."""
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started)) if self.started else "?"
        return f"{self.user}@{self.controller} (opsrunner pid {self.pid}, playbook {self.playbook}, started {when})"


def describe_holder(holder: LockHolder | None) -> str:
    return holder.describe() if holder is not None else NOT_WRITTEN_YET
