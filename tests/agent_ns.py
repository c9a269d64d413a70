"""The agent's package (opsrunner/remote), imported in this process as pure logic: its modules
are ordinary modules, so a test calls their functions directly and patches a name where the
module that uses it looks it up (pytest's monkeypatch on that module)."""

from __future__ import annotations

import importlib
import io
import pkgutil
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import opsrunner.remote as package
from opsrunner.connections.artifact import agent_artifact

MODULES: dict[str, ModuleType] = {
    info.name: importlib.import_module(f"{package.__name__}.{info.name}")
    for info in pkgutil.iter_modules(package.__path__)
}


def _merged() -> dict[str, Any]:
    names: dict[str, Any] = {}
    for module in MODULES.values():
        names.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    return names


#: Every top-level name of the package's modules, read-only: for calling, not for patching.
AGENT: dict[str, Any] = _merged()


def unpack_agent(folder: Path) -> Path:
    """The shipped artifact unpacked as a target's cache holds it: `folder` goes on sys.path,
    and `import opsrunner_agent` is the agent as a target runs it."""
    with zipfile.ZipFile(io.BytesIO(agent_artifact())) as archive:
        archive.extractall(folder)
    return folder
