"""Module metadata from the shipped schemas: cheap, and importing no module's code (base.py
reads it too)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from opsrunner.packagedata import package_path
from opsrunner.validation import load_schema


@dataclass(frozen=True)
class ModuleInfo:
    name: str
    schema: dict[str, Any]
    free_form: str | None
    check_mode: bool
    description: str
    #: The folder of a role that its controller-side files are looked for in first.
    local_folder: str = "files"


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
        local_folder=str(meta.get("local_folder", "files")),
    )
