"""The run lock, on the controller: one run of a playbook with its inventories at a time on
this machine (`opsrunner play --lock`; scheduled runs always take it). An flock on a file
named after the playbook and inventories, holding the holder record; the kernel releases
it when the run's process ends, however it ends."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from opsrunner.errors import OpsrunnerError
from opsrunner.locks.holder import LockHolder, describe_holder


def state_dir() -> Path:
    """~/.local/state/opsrunner (XDG_STATE_HOME respected)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "opsrunner"


class RunLockedError(OpsrunnerError):
    """Another run holds the run lock of this playbook+inventory (exit code 2, as a failed run)."""

    exit_code = 2

    def __init__(self, path: Path, holder: LockHolder | None) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"locked by {describe_holder(holder)}: another run of this playbook and "
                         f"inventory is in progress (lock {path})")


@dataclass
class RunLock:
    """The run lock's file, and its open handle while this run holds it."""

    path: Path
    handle: IO[str] | None = None

    @classmethod
    def for_run(cls, playbook: Path, inventories: Sequence[Path], folder: Path | None = None) -> RunLock:
        key = json.dumps([str(playbook.resolve()), sorted(str(p.resolve()) for p in inventories)])
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return cls((folder or state_dir() / "locks") / f"{playbook.stem}-{digest}.lock")

    def acquire(self, holder: LockHolder) -> None:
        """Take it now or raise RunLockedError naming the run that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read()
            handle.close()
            record = None
            with contextlib.suppress(ValueError):
                record = json.loads(text) if text.strip() else None
            raise RunLockedError(self.path, LockHolder.from_record(record)) from None
        handle.truncate(0)
        handle.write(json.dumps(holder.record()))
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.truncate(0)
            self.handle.close()
            self.handle = None


def acquire_run_lock(playbook: Path, inventories: Sequence[str], run_id: str | None = None) -> RunLock:
    """`play --lock`: take the run lock of this playbook and inventories, or raise RunLockedError."""
    lock = RunLock.for_run(playbook, [Path(i) for i in inventories] or [Path("inventory/hosts.yml")])
    lock.acquire(LockHolder.this_run(str(playbook), run_id))
    return lock
