"""Shared fixtures: the private sshd, hostile wrappers, inventories, and process hygiene."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import lxc as lxc_rig
from tests import pg
from tests.alerts import Alerts
from tests.sshd import PrivateSSHD, start_sshd

#: The process guard (tests/procguard.py): a test, and the suite, fail when they leave a
#: process running. A plugin, so that its fixtures are set up before every other one.
pytest_plugins = ["tests.procguard"]

ROOT = Path(__file__).resolve().parent.parent

# Started from a background shell (`cmd &` in a script, cron wrappers), this process has
# SIGINT ignored, and every controller a test starts would inherit that: the Ctrl-C tests
# could not press Ctrl-C. The suite starts what it runs with SIGINT as a terminal has it (a
# handler here is reset to the default by exec; an ignored signal would survive it). SIGHUP
# stays as it came, so `nohup` still keeps the suite alive.
# tests/modules/test_signal_dispositions.py starts controllers with it ignored on purpose.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
WRAPPERS = Path(__file__).resolve().parent / "wrappers"
REAPER = f"{sys.executable} {WRAPPERS / 'session_reaper.py'} --"
FD_HOLDER = f"{sys.executable} {WRAPPERS / 'fd_holder.py'} --"
TRAINER = ROOT / "examples" / "demo_trainer" / "train.py"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (the README's test command): two workers a core, four at least, eight at most;
    PYTEST_XDIST_AUTO_NUM_WORKERS, where set, is xdist's to read. The suite mostly waits (on
    sshd round trips, containers, timeouts and jobs that must die), not computes: on two cores
    its CPU time is about 40% of its wall time run serially."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return max(4, min(8, 2 * (os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg.PrivatePostgres]:
    """The private PostgreSQL cluster of the shared-history tests (tests/pg.py), one per session."""
    from tests import procguard

    try:
        with procguard.outside_test():
            server = pg.start_postgres()
    except pg.PostgresUnavailable as exc:
        if pg.MODE == "require":
            pytest.fail(f"PostgreSQL required (OPSRUNNER_TEST_POSTGRES=require) but unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    procguard.exempt(server.pid)
    if server.lifeline is not None:
        procguard.exempt(server.lifeline.pid)  # the server's watchdog lives as long as it
    try:
        yield server
    finally:
        server.stop()


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
    from tests import procguard  # here, not above: imported as the plugin first (assertion rewriting)

    # Started by whichever test first asks for it, and kept for the session: not that test's.
    with procguard.outside_test():
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    procguard.exempt(server.proc.pid)
    if server.lifeline is not None:
        procguard.exempt(server.lifeline.pid)  # the daemon's watchdog lives as long as it
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def lxc() -> Iterator[lxc_rig.Container]:
    """The real LXC container (tests/lxc.py); skipped with the exact reason where none can run."""
    from tests import procguard

    try:
        with procguard.outside_test(suite_too=True):  # shared with other sessions, outlives this one
            container = lxc_rig.ensure()
    except lxc_rig.LxcUnavailable as exc:
        if lxc_rig.MODE == "require":
            pytest.fail(f"LXC container required (OPSRUNNER_TEST_LXC=require) but unavailable: {exc}")
        pytest.skip(f"LXC container unavailable: {exc}")
    try:
        yield container
    finally:
        container.release()


@pytest.fixture(scope="session")
def lxc_files(lxc: lxc_rig.Container) -> Iterator[Path]:
    """This session's directory in the container's shared one: demo trainer and hostile wrappers."""
    session = lxc_rig.stage_session_files(lxc, ROOT)
    try:
        yield session
    finally:
        shutil.rmtree(session, ignore_errors=True)


#: Transports the contract suite and the module tests run over. The lxc-attach ones go
#: through ssh to this machine, then into the real container, as `pct exec` does.
LXC_TRANSPORTS = ["ssh+lxc-attach", "ssh+lxc-attach+reaper+fd_holder"]
TRANSPORTS = ["local", "ssh", "ssh+reaper", "ssh+reaper+fd_holder", *LXC_TRANSPORTS]


def host_vars_for(transport: str, sshd: PrivateSSHD | None, lxc_files: Path | None = None,
                  container: lxc_rig.Container | None = None) -> dict[str, Any]:
    if transport == "local":
        return {"connection": "local"}
    assert sshd is not None
    if transport in LXC_TRANSPORTS:
        assert container is not None and lxc_files is not None
        chain = [container.attach]
        if transport.endswith("+reaper+fd_holder"):
            chain += [f"python3 {lxc_files / 'session_reaper.py'} --", f"python3 {lxc_files / 'fd_holder.py'} --"]
        return sshd.host_vars(wrapper=chain)
    wrappers = {"ssh": [], "ssh+reaper": [REAPER], "ssh+reaper+fd_holder": [REAPER, FD_HOLDER],
                "ssh+fd_holder": [FD_HOLDER]}[transport]
    return sshd.host_vars(wrapper=wrappers) if wrappers else sshd.host_vars()


def marked_host(host_vars: dict[str, Any], folder: Path, python: str) -> dict[str, Any]:
    """The same host, with every process opsrunner starts there naming `folder` on its command
    line: the hostile wrapper scripts are copies in `folder`, and the agent and watchdog run
    from a link to `python` in it. Name `folder` after the test's marker, and a kill pattern of
    that marker alone matches the test's own agent, shell and wrapper chain (the self-matching
    trap of the field notes) and nothing else on the machine. `folder` must be visible at the
    same path on the target (the test's tmp dir, or the container's shared directory)."""
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "python3"
    link.symlink_to(python if python.startswith("/") else f"/usr/bin/{python}")
    chain = []
    for layer in host_vars.get("wrapper") or []:
        if isinstance(layer, str):
            for script in ("session_reaper.py", "fd_holder.py"):
                for word in layer.split():
                    if word.endswith("/" + script):
                        shutil.copy(WRAPPERS / script, folder / script)
                        layer = layer.replace(word, str(folder / script))
        chain.append(layer)
    return {**host_vars, "wrapper": chain, "python_interpreter": str(link)}


def side_for(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> lxc_rig.TargetSide:
    """The target side of a transport: this machine, or the container (same paths both sides)."""
    if transport not in LXC_TRANSPORTS:
        return lxc_rig.TargetSide(sys.executable, TRAINER, tmp_path)
    files = request.getfixturevalue("lxc_files")
    # A plain name, as pytest's tmp_path has: a command naming a path with shell syntax in it
    # would be run through /bin/sh by launch_detached.
    work = Path(tempfile.mkdtemp(prefix=re.sub(r"[^\w.-]", "_", request.node.name)[:40] + "-", dir=files))
    return lxc_rig.TargetSide("python3", files / "train.py", work, request.getfixturevalue("lxc"))


def vars_for(transport: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """Host vars for a transport, starting the sshd and the container only when it needs them."""
    server = request.getfixturevalue("sshd") if transport != "local" else None
    if transport in LXC_TRANSPORTS:
        return host_vars_for(transport, server, request.getfixturevalue("lxc_files"),
                             request.getfixturevalue("lxc"))
    return host_vars_for(transport, server)


@pytest.fixture(params=[t if t not in LXC_TRANSPORTS else pytest.param(t, marks=pytest.mark.lxc) for t in TRANSPORTS])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def transport_vars(transport: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    return vars_for(transport, request)


@pytest.fixture
def side(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> lxc_rig.TargetSide:
    return side_for(transport, request, tmp_path)


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


@pytest.fixture
def alerts() -> Iterator[Alerts]:
    """An alert receiver on 127.0.0.1 (tests/alerts.py), stopped when the test ends."""
    a = Alerts()
    yield a
    a.server.shutdown()
    a.server.server_close()
    a.thread.join(5)
