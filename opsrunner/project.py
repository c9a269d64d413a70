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


def resolve_playbook(name: str, cwd: Path) -> Path:
    """A bare name: the working directory, its playbooks/, then the project root's playbooks/."""
    candidate = Path(name)
    if candidate.is_absolute() or candidate.exists() or "/" in name:
        return candidate
    root = find_root(cwd)
    folders = [cwd, cwd / "playbooks"] + ([root, root / "playbooks"] if root else [])
    for folder in folders:
        if (folder / name).exists():
            return folder / name
    return candidate
