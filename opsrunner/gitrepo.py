"""Asking git about the checkout a file is in (the run history's commit, a release's name)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 10


def run_git(path: Path, *argv: str, timeout: float = GIT_TIMEOUT_S) -> subprocess.CompletedProcess[str] | None:
    """`git -C FOLDER ARGV` for the folder holding `path`; None where git is missing or hangs."""
    folder = path if path.is_dir() else path.parent
    try:
        return subprocess.run(["git", "-C", str(folder), *argv], capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


@dataclass(frozen=True)
class GitState:
    """What the commit of a run says of the files it ran: None outside a git checkout."""

    commit: str | None = None
    #: Uncommitted changes to tracked files, or a file the run reads that git does not track.
    dirty: bool | None = None
    #: The files the run reads that git does not track (`??` in `git status`; ignored files
    #: are left out), relative to the checkout's top: `commit` does not hold them.
    untracked: tuple[str, ...] = ()


def git_state(path: Path, reads: Iterable[Path] = ()) -> GitState:
    """The commit of the checkout holding `path` (a playbook), whether it is dirty, and which
    of `path` and `reads` (files and folders the run reads: its task files, roles,
    inventories) are untracked there. Three git commands; paths outside the checkout are
    not its business."""
    head = run_git(path, "rev-parse", "HEAD", "--show-toplevel")
    if head is None or head.returncode != 0 or len(head.stdout.splitlines()) < 2:
        return GitState()
    commit, top = head.stdout.splitlines()[:2]
    status = run_git(path, "status", "--porcelain", "--untracked-files=no")
    if status is None or status.returncode != 0:
        return GitState()
    root = Path(top).resolve()
    inside = sorted({str(p) for p in (Path(r).resolve() for r in (path, *reads)) if p.is_relative_to(root)})
    found = run_git(path, "ls-files", "--others", "--exclude-standard", "--full-name", "-z", "--", *inside) \
        if inside else None
    untracked = tuple(sorted(f for f in found.stdout.split("\0") if f)) if found and found.returncode == 0 else ()
    return GitState(commit.strip(), bool(status.stdout.strip()) or bool(untracked), untracked)
