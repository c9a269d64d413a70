"""Module metadata from the shipped schemas (info.py), and lazy import of module code."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

from opsrunner.modules.info import ModuleInfo, module_info, module_names

if TYPE_CHECKING:
    from opsrunner.modules.base import Module

__all__ = ["ModuleInfo", "get_module", "module_info", "module_names"]


@lru_cache(maxsize=64)
def get_module(name: str) -> Module:
    """Import `opsrunner.modules.<name>` and return its MODULE instance."""
    py_name = {"assert": "assert_"}.get(name, name)
    mod = importlib.import_module(f"opsrunner.modules.{py_name}")
    module: Module = mod.MODULE
    return module
