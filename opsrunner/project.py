"""The project root: where the default inventory and playbooks/ are found from any subdirectory.

The root is the nearest directory, from the working directory upward, that holds
`opsrunner.cfg` (an empty file marks a project) or `inventory/hosts.yml`.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = "opsrunner.cfg"
DEFAULT_INVENTORY = Path("inventory") / "hosts.yml"


def find_root(start: Path) -> Path | None:
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file() or (folder / DEFAULT_INVENTORY).is_file():
            return folder
    return None


def default_inventory(cwd: Path) -> Path:
    """inventory/hosts.yml of the project root (the working directory's when there is no root)."""
    root = find_root(cwd)
    return (root or cwd) / DEFAULT_INVENTORY


def playbook_folders(name: str, cwd: Path) -> list[Path]:
    """Where a playbook name is looked for: a bare name in the working directory, its
    playbooks/, then the project root and its playbooks/; a path only where it says."""
    if Path(name).is_absolute() or "/" in name:
        return []
    root = find_root(cwd)
    return [cwd, cwd / "playbooks"] + ([root, root / "playbooks"] if root and root != cwd else [])


def resolve_playbook(name: str, cwd: Path) -> Path:
    """A bare name: the working directory, its playbooks/, then the project root's playbooks/."""
    candidate = Path(name)
    if candidate.exists():
        return candidate
    for folder in playbook_folders(name, cwd):
        if (folder / name).exists():
            return folder / name
    return candidate
