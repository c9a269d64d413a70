"""Shared fixtures: the private sshd, hostile wrappers, inventories, and process hygiene."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.sshd import PrivateSSHD, start_sshd

ROOT = Path(__file__).resolve().parent.parent
WRAPPERS = Path(__file__).resolve().parent / "wrappers"
REAPER = f"{sys.executable} {WRAPPERS / 'session_reaper.py'} --"
FD_HOLDER = f"{sys.executable} {WRAPPERS / 'fd_holder.py'} --"


@pytest.fixture(scope="session", autouse=True)
def private_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every `play` in the suite records its run history here, never in the user's own database."""
    old = os.environ.get("OPSRUNNER_HISTORY")
    os.environ["OPSRUNNER_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.db")
    yield
    if old is None:
        os.environ.pop("OPSRUNNER_HISTORY", None)
    else:
        os.environ["OPSRUNNER_HISTORY"] = old


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSSHD]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()


#: Transports the contract suite and the module tests run over.
TRANSPORTS = ["local", "ssh", "ssh+reaper", "ssh+reaper+fd_holder"]


def host_vars_for(transport: str, sshd: PrivateSSHD | None) -> dict[str, Any]:
    if transport == "local":
        return {"connection": "local"}
    assert sshd is not None
    wrappers = {"ssh": [], "ssh+reaper": [REAPER], "ssh+reaper+fd_holder": [REAPER, FD_HOLDER],
                "ssh+fd_holder": [FD_HOLDER]}[transport]
    return sshd.host_vars(wrapper=wrappers) if wrappers else sshd.host_vars()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def transport_vars(transport: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    return host_vars_for(transport, server)


def write_inventory(path: Path, hosts: dict[str, dict[str, Any]], groups: dict[str, list[str]] | None = None,
                    all_vars: dict[str, Any] | None = None) -> Path:
    children = {g: {"hosts": {h: None for h in members}} for g, members in (groups or {}).items()}
    data: dict[str, Any] = {"all": {"hosts": hosts}}
    if children:
        data["all"]["children"] = children
    if all_vars:
        data["all"]["vars"] = all_vars
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_yaml(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def marker() -> str:
    """A unique token for command lines of processes a test starts (and must find/kill)."""
    return f"opsrunner-test-{uuid.uuid4().hex[:12]}"


def sleep_marker() -> str:
    """A unique `sleep` argument: `sleep 1000.<digits>` is findable and harmless."""
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


def pids_with(token: str) -> list[int]:
    """Pids whose command line contains `token` (the test's own unique marker)."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie is dead, only not yet reaped
        except (OSError, IndexError):
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmdline:
            found.append(int(name))
    return found


def kill_marked(token: str) -> None:
    for pid in pids_with(token):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@pytest.fixture
def cleanup_marker() -> Iterator[str]:
    """A marker; every process carrying it is SIGKILLed when the test ends."""
    token = sleep_marker()
    yield token
    kill_marked(token)
