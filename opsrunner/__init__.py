"""opsrunner: declarative restarts of long-running jobs over ssh and container exec hops.

The library's entry point is `opsrunner.run(opsrunner.PlayRequest(...))` (api.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["PlayRequest", "RunResult", "__version__", "run"]

if TYPE_CHECKING:
    from opsrunner.api import PlayRequest, RunResult, run


def __getattr__(name: str) -> Any:
    # Loaded on first use: the CLI's --version and the agent's package need none of it.
    if name in ("run", "PlayRequest", "RunResult"):
        from opsrunner import api

        return getattr(api, name)
    raise AttributeError(f"module 'opsrunner' has no attribute {name!r}")
