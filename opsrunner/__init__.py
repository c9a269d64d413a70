"""opsrunner: declarative restarts of long-running jobs over ssh and container exec hops.

The library's entry point is `opsrunner.run(opsrunner.PlayRequest(...))` (api.py)."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["NoHostsToTarget", "OpsrunnerError", "PlayRequest", "RunLockedError", "RunResult", "ValidationError",
           "__version__", "run"]

#: What `opsrunner.NAME` loads, from where.
_LAZY = {"run": "opsrunner.api", "PlayRequest": "opsrunner.api", "RunResult": "opsrunner.api",
         "OpsrunnerError": "opsrunner.errors", "ValidationError": "opsrunner.errors",
         "NoHostsToTarget": "opsrunner.targets", "RunLockedError": "opsrunner.locks.run_lock"}


def __getattr__(name: str) -> Any:
    # Loaded on first use, and not even for the type checker: the agent's package
    # (opsrunner.remote, checked alone for Python 3.8) must not pull the controller in.
    # Typed callers import from opsrunner.api.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'opsrunner' has no attribute {name!r}")
