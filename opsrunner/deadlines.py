"""Every remote call has a deadline: the task's `timeout`, else the play's, else a default.

`shell` and `command` default to the `default_timeout` variable (3600 s unless set in the
inventory, play vars, task vars or with -e); the agent modules' operations are short and
have the per-module defaults below (docs/safety.md, "What is bounded", lists them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

#: `shell`/`command` when neither the task, the play nor `default_timeout` says otherwise.
DEFAULT_TIMEOUT_S = 3600.0
DEFAULT_TIMEOUT_VAR = "default_timeout"
COMMAND_MODULES = frozenset({"shell", "command"})
#: Agent operations by module (seconds). kill_old adds its `grace`; verify and kill_old's
#: GPU wait extend their own budget to their `within`/`stable_for`/`wait_gpu_free` windows.
AGENT_DEADLINES_S: dict[str, float] = {
    "kill_old": 300.0,
    "launch_detached": 120.0,
    "verify": 300.0,
    "deploy_code": 1800.0,
    "clear_cache": 1800.0,
}


def module_default(module: str, args: Mapping[str, Any], variables: Mapping[str, Any]) -> Any:
    """The deadline a task gets when neither it nor its play sets `timeout` (may be a template)."""
    if module in COMMAND_MODULES:
        return variables.get(DEFAULT_TIMEOUT_VAR, DEFAULT_TIMEOUT_S)
    base = AGENT_DEADLINES_S.get(module)
    if base is not None and module == "kill_old":
        with contextlib.suppress(TypeError, ValueError):
            base = max(base, float(args.get("grace") or 10) + 60)
    return base


def seconds(value: Any) -> float:
    """A deadline in seconds; ValueError names what was wrong."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"timeout must be a number of seconds, got {value!r}") from None
    if not result > 0 or result == float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, got {value!r}")
    return result
