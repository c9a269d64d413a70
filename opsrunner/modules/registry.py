"""Module metadata from the shipped schemas (cheap), and lazy import of module code."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from opsrunner.packagedata import package_path
from opsrunner.validation import load_schema

if TYPE_CHECKING:
    from opsrunner.modules.base import Module


@dataclass(frozen=True)
class ModuleInfo:
    name: str
    schema: dict[str, Any]
    free_form: str | None
    check_mode: bool
    description: str


@lru_cache(maxsize=1)
def module_names() -> tuple[str, ...]:
    folder = package_path("schema/modules")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


@lru_cache(maxsize=64)
def module_info(name: str) -> ModuleInfo:
    schema = load_schema(f"modules/{name}")
    meta = schema.get("x-opsrunner", {})
    return ModuleInfo(
        name=name,
        schema=schema,
        free_form=meta.get("free_form"),
        check_mode=bool(meta.get("check_mode", False)),
        description=schema.get("description", ""),
    )


@lru_cache(maxsize=64)
def get_module(name: str) -> Module:
    """Import `opsrunner.modules.<name>` and return its MODULE instance."""
    py_name = {"assert": "assert_"}.get(name, name)
    mod = importlib.import_module(f"opsrunner.modules.{py_name}")
    module: Module = mod.MODULE
    return module
