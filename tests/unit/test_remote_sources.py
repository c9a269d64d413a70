"""The scripts that run on targets must parse on Python 3.8 and use only the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from opsrunner.connections.agent import supervisor_source
from opsrunner.connections.wrappers import watchdog_source
from opsrunner.modules.base import agent_source
from opsrunner.modules.job_lock import keeper_source

SOURCES = {"agent": agent_source(), "watchdog": watchdog_source(), "keeper": keeper_source(),
           "supervisor": supervisor_source()}
#: Standard library modules of later Pythons than the one running the tests (3.12: sha2).
LATER_STDLIB = {"_sha2"}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_parses_as_python_3_8(name: str) -> None:
    ast.parse(SOURCES[name], feature_version=(3, 8))


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_imports_only_the_standard_library(name: str) -> None:
    tree = ast.parse(SOURCES[name])
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
    assert modules <= set(sys.stdlib_module_names) | LATER_STDLIB, modules - set(sys.stdlib_module_names)


def test_agent_starts_with_its_marker() -> None:
    # kill_old and verify recognise opsrunner's own helpers by this marker near the start
    # of their command line (python3 -S -c # opsrunner-agent ...).
    assert SOURCES["agent"].startswith("# opsrunner-agent")
    assert SOURCES["watchdog"].startswith("# opsrunner-watchdog")
    assert SOURCES["keeper"].startswith("# opsrunner-lock-keeper")
    assert SOURCES["supervisor"].startswith("# opsrunner-supervisor")
    assert Path(__file__).exists()
