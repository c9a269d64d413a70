"""The controller lock (`play --lock`: one run of a playbook+inventory at a time on this
machine) and the holder record that both it and the job lock on targets show to a run
that finds them taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opsrunner.errors import OpsrunnerError


def state_dir() -> Path:
    """~/.local/state/opsrunner (XDG_STATE_HOME respected)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "opsrunner"


def process_started() -> float:
    """When this process started (epoch seconds), from /proc; now where /proc is missing."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


def holder_record(playbook: str) -> dict[str, Any]:
    """Who is running: shown to a second run as 'locked by ...'."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"controller": socket.gethostname(), "user": user, "pid": os.getpid(),
            "playbook": playbook, "started": round(process_started(), 3)}


def describe_holder(record: dict[str, Any] | None) -> str:
    """`alice@ctl (opsrunner pid 4242, playbook restart.yml, started 2026-12-01 01:02:03 UTC)`."""
    if not record or "pid" not in record:
        return "another run (its holder record is not written yet)"
    started = record.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(started))) if started else "?"
    return (f"{record.get('user', '?')}@{record.get('controller', '?')} (opsrunner pid {record['pid']}, "
            f"playbook {record.get('playbook', '?')}, started {when})")


class LockedError(OpsrunnerError):
    """Another run holds the controller lock of this playbook+inventory (exit code 2, as a failed run)."""

    exit_code = 2

    def __init__(self, path: Path, holder: dict[str, Any] | None) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"locked by {describe_holder(holder)}: another run of this playbook and "
                         f"inventory is in progress (lock {path})")


@dataclass
class ControllerLock:
    """flock on a file named after the playbook and inventories; released when the process ends."""

    path: Path
    handle: IO[str] | None = None

    @classmethod
    def for_run(cls, playbook: Path, inventories: Sequence[Path], folder: Path | None = None) -> ControllerLock:
        key = json.dumps([str(playbook.resolve()), sorted(str(p.resolve()) for p in inventories)])
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return cls((folder or state_dir() / "locks") / f"{playbook.stem}-{digest}.lock")

    def acquire(self, playbook: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read()
            handle.close()
            holder = None
            with contextlib.suppress(ValueError):
                holder = json.loads(text) if text.strip() else None
            raise LockedError(self.path, holder) from None
        handle.truncate(0)
        handle.write(json.dumps(holder_record(playbook)))
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.truncate(0)
            self.handle.close()
            self.handle = None


def lock_run(playbook: Path, inventories: Sequence[str]) -> ControllerLock:
    """`play --lock`: take the controller lock of this playbook and inventories, or raise LockedError."""
    lock = ControllerLock.for_run(playbook, [Path(i) for i in inventories] or [Path("inventory/hosts.yml")])
    lock.acquire(str(playbook))
    return lock
