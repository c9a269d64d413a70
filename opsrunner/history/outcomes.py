"""A run's outcome kept beside a SQLite history that could not be written when the run ended.

A disk that fills during a run fails the history's writes (the run goes on, with a warning):
its row, opened at the start, would stay open, and readers would call a run that exited
normally `aborted (controller gone)`. So each run reserves, before its row is written and
while there is room, a small file beside the database (`.history.db.outcomes/RUN_ID.json`,
RESERVED_BYTES of blanks). A run whose row was closed as usual deletes it. A run whose
history failed writes its end (exit code, recap, why, what was not recorded) into that
reserved space, which needs no more room. Whoever opens the history for writing next (the
next run, `history`, `show`, `schedule list`) records those outcomes in their rows and
deletes the files; a reader that cannot write (the dashboard, a disk still full) shows them
all the same.

A PostgreSQL history has no file beside it: there, the run's end is tried once more at
its end (recorder.py), and nothing is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsrunner.history.location import is_postgres

#: The room reserved for a run's outcome: its row without its task results (command line,
#: extra vars, recap: ~100 bytes a host) fits in it for a hundred hosts and more. A bigger one is
#: written all the same, where there is room.
RESERVED_BYTES = 16384
SUFFIX = ".outcomes"


def folder_for(location: str | Path) -> Path | None:
    """Where a history's kept outcomes are: beside its SQLite file; None for PostgreSQL."""
    if is_postgres(location):
        return None
    path = Path(location).expanduser().absolute()
    return path.with_name(f".{path.name}{SUFFIX}")  # hidden: `history.db*` names the database's files


@dataclass(frozen=True)
class Reservation:
    """A run's reserved outcome file: blanks until an outcome is kept in it."""

    path: Path

    @classmethod
    def make(cls, location: str, run_id: str) -> Reservation | None:
        """Reserve the room now (None: no room, no folder, a PostgreSQL history)."""
        folder = folder_for(location)
        if folder is None:
            return None
        path = folder / f"{run_id}.json"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # command lines: its owner only
            try:
                os.write(fd, b" " * RESERVED_BYTES)  # written, not sparse: the blocks are the file's
            finally:
                os.close(fd)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return cls(path)

    def keep(self, outcome: dict[str, Any]) -> bool:
        """Write the outcome over the blanks (the rest stays blank: JSON reads past it)."""
        data = json.dumps(outcome, default=str).encode()
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.pwrite(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            return False
        return True

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass(frozen=True)
class Kept:
    """An outcome kept in a file: the run's row (its columns, the controller stamp's too)."""

    path: Path
    row: dict[str, Any]


def kept(location: str | Path) -> tuple[list[Kept], list[Path]]:
    """The outcomes kept beside a history, and the reserved files still blank (of runs going
    on, or whose controller died)."""
    folder = folder_for(location)
    if folder is None or not folder.is_dir():
        return [], []
    found: list[Kept] = []
    blank: list[Path] = []
    for path in sorted(folder.glob("*.json")):
        try:
            text = path.read_bytes().strip()
        except OSError:
            continue
        if not text:
            blank.append(path)
            continue
        with contextlib.suppress(ValueError):
            data = json.loads(text)
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                found.append(Kept(path, data))
    return found, blank


def older_than_a_day(path: Path) -> bool:
    """A blank reservation without a row this old: its run never recorded its start, and died."""
    try:
        return time.time() - path.stat().st_mtime > 86400
    except OSError:
        return False


def forget(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
