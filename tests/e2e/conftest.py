"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import kill_marked


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A private HOME: the default inventory puts the demo under ~/opsrunner-demo. Every
    process whose command line names it (the demo trainer) is killed when the test ends."""
    h = tmp_path / "home"
    h.mkdir()
    yield h
    kill_marked(str(h))
