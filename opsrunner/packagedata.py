"""Files shipped inside the opsrunner package (JSON schemas, the agent's sources), read from the
package directory. importlib.resources would add ~9 ms to every start for the same files:
opsrunner is always installed as a directory (pip, editable or not), never from a zip."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def package_path(relative: str) -> Path:
    """A path inside the package, e.g. 'schema/modules' or 'remote/agent.py'."""
    return PACKAGE_DIR / relative


def package_text(relative: str) -> str:
    return package_path(relative).read_text("utf-8")
