"""Fixtures of the contract tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sshd import PrivateSSHD, start_sshd


@pytest.fixture(scope="module")
def jump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSSHD]:
    """A second private sshd: the ProxyJump hop in front of the suite's own."""
    server = start_sshd(tmp_path_factory.mktemp("jump-sshd"))
    try:
        yield server
    finally:
        server.stop()
