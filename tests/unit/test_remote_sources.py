"""What runs on targets must parse on Python 3.8 and use only the standard library: every
module of the agent's package (opsrunner/remote), and the boot scripts that bring it up."""

from __future__ import annotations

import ast
import sys

import pytest

from opsrunner.connections import artifact
from opsrunner.connections.wrappers import watchdog_source

MODULES = artifact.package_sources()
BOOTS = {"unpack": artifact._UNPACK, "inline": artifact.INLINE}
#: Standard library modules of later Pythons than the one running the tests (3.12: sha2).
LATER_STDLIB = {"_sha2"}


def _sources() -> dict[str, str]:
    return {**{name: data.decode() for name, data in MODULES.items()}, **BOOTS}


@pytest.mark.parametrize("name", sorted(_sources()))
def test_parses_as_python_3_8(name: str) -> None:
    ast.parse(_sources()[name], feature_version=(3, 8))


@pytest.mark.parametrize("name", sorted(_sources()))
def test_imports_only_the_standard_library_and_its_own_package(name: str) -> None:
    tree = ast.parse(_sources()[name])
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    modules.discard(artifact.PACKAGE)  # the inline boot imports the package it holds
    assert modules <= set(sys.stdlib_module_names) | LATER_STDLIB, modules - set(sys.stdlib_module_names)


def test_the_scripts_sent_alone_import_nothing_of_the_package() -> None:
    """The watchdog and the supervisor run alone in a fresh Python."""
    for name in ("watchdog.py", "supervisor.py"):
        tree = ast.parse(MODULES[name])
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level], name


def test_what_runs_on_a_target_starts_with_its_marker() -> None:
    # kill_old and verify recognise opsrunner's own helpers by this marker near the start
    # of their command line (python3 -S -c # opsrunner-agent ...).
    assert artifact.INLINE.startswith("# opsrunner-agent")
    assert artifact._UNPACK.startswith("# opsrunner-agent")
    assert "# opsrunner-agent (cached)" in artifact.START[:300]
    assert watchdog_source().startswith("# opsrunner-watchdog")
    assert MODULES["supervisor.py"].startswith(b"# opsrunner-supervisor")
