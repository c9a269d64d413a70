"""Process hygiene: a test that leaves a process running fails, and so does the suite.

Every process the suite starts carries OPSTEST_SUITE=<this session's token> in its
environment (set when the session starts; the test sshd passes it on to every session it
serves with `SetEnv`, so commands run over ssh - and through `lxc-attach --keep-env` in
the container - carry it too). While a test runs, OPSTEST_MARK=<the test's own token> is
set as well. Neither name starts with OPSRUNNER_: launch_detached gives its job the
environment without those.

Before a test, the guard notes the suite's processes that exist; after it (after every
other fixture of the test has ended its processes), a suite process that was not there
before, or that carries the test's mark, is the test's leftover. The guard waits up to
GRACE_S for leftovers to exit, then SIGKILLs exactly those pids (checked against their
start time) and fails the test naming them (an error at its teardown). A process whose
command line names this session's pytest temp directory counts as the suite's too (one
started with a cleared environment, or an sshd: OpenSSH writes its process title over
its environment).

Resources that outlive a test on purpose - the session's sshd, started lazily inside
whichever test first needs it, and the LXC container - are started `outside_test()` (the
test's mark taken out of the environment while they start) and the sshd daemon is
`exempt()`; what runs below it (its per-connection processes, whose environment cannot be
read) is still counted. Module-scoped fixtures are set up before the test's guard starts
and torn down after it ends, so their processes are never counted against a test.

At the end of the session, after every session fixture is torn down, no process of the
suite may remain: the same wait, kill and failure (an error at the last test's teardown).

Only this machine's /proc is read; processes that cannot be read are ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUITE_VAR = "OPSTEST_SUITE"
MARK_VAR = "OPSTEST_MARK"
#: How long leftovers get to exit on their own after the test's own cleanup.
GRACE_S = 5.0


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int  # clock ticks after boot (/proc/PID/stat field 22): a reused pid has another
    ppid: int
    cmdline: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.start)

    def describe(self) -> str:
        cmd = self.cmdline if len(self.cmdline) <= 400 else self.cmdline[:400] + " ..."
        return f"pid {self.pid} (ppid {self.ppid}): {cmd}"


class _State:
    def __init__(self) -> None:
        self.suite: str | None = None
        self.basetemp: str | None = None
        self.exempt: set[tuple[int, int]] = set()


_state = _State()


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _lineage() -> set[int]:
    """This process and its ancestors: never leftovers."""
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        st = _stat(pid)
        pid = st[1] if st else 0
    return pids


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    if raw:
        return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    with contextlib.suppress(OSError):
        return "[" + Path(f"/proc/{pid}/comm").read_text().strip() + "]"
    return ""


def suite_processes(mark: str | None = None) -> dict[tuple[int, int], Proc]:
    """The live processes of this session (and those carrying `mark`), by (pid, start): by
    the markers in their environment, this session's temp directory on their command line,
    or descent from an exempt resource (the sshd's per-connection processes: OpenSSH writes
    its process titles over its environment, so theirs cannot be read)."""
    if _state.suite is None:
        return {}
    wanted = {f"{SUITE_VAR}={_state.suite}".encode()}
    if mark:
        wanted.add(f"{MARK_VAR}={mark}".encode())
    temp = _state.basetemp
    mine = _lineage()
    live: dict[int, tuple[str, int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in mine:
            st = _stat(int(name))
            if st is not None and st[0] not in "ZXx":  # a zombie is dead, only not yet reaped
                live[int(name)] = st
    roots = {pid for pid, start in _state.exempt if pid in live and live[pid][2] == start}

    def below_a_root(pid: int) -> bool:
        seen = set()
        while pid in live and pid not in seen:
            seen.add(pid)
            pid = live[pid][1]
            if pid in roots:
                return True
        return False

    found: dict[tuple[int, int], Proc] = {}
    for pid, (_, ppid, start) in live.items():
        try:
            env = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            env = set()
        cmdline = _cmdline(pid)
        if wanted & env or (temp and temp in cmdline) or below_a_root(pid):
            found[(pid, start)] = Proc(pid, start, ppid, cmdline)
    return found


def exempt(pid: int) -> None:
    """A process that outlives the test that started it on purpose (a session resource)."""
    st = _stat(pid)
    if st is not None:
        _state.exempt.add((pid, st[2]))


@contextlib.contextmanager
def outside_test(suite_too: bool = False) -> Iterator[None]:
    """Start a resource that outlives the current test: without the test's mark in the
    environment (and without the suite's, for one that outlives the session as well)."""
    names = [MARK_VAR, SUITE_VAR] if suite_too else [MARK_VAR]
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _settle(find: Callable[[], list[Proc]], grace: float = GRACE_S) -> list[Proc]:
    """What `find()` returns once it is empty or `grace` has passed."""
    deadline = time.monotonic() + grace
    while True:
        left = find()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _kill(procs: list[Proc]) -> None:
    """SIGKILL exactly these processes (by pid, the same process: its start time checked)."""
    for proc in procs:
        st = _stat(proc.pid)
        if st is not None and st[2] == proc.start:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
            (st := _stat(p.pid)) is not None and st[2] == p.start and st[0] not in "ZXx" for p in procs):
        time.sleep(0.05)


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def suite_process_guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's token in the environment; after the last teardown, nothing of it left."""
    old = os.environ.get(SUITE_VAR)
    _state.suite = uuid.uuid4().hex
    _state.basetemp = str(tmp_path_factory.getbasetemp()) + os.sep
    os.environ[SUITE_VAR] = _state.suite
    try:
        yield
    finally:
        _set(SUITE_VAR, old)
    left = _settle(lambda: list(suite_processes().values()))
    if left:
        _kill(left)
        pytest.fail("process hygiene: after the whole suite these processes it started were still running "
                    "(now SIGKILLed):\n  " + "\n  ".join(p.describe() for p in left), pytrace=False)


@pytest.fixture(autouse=True)
def process_guard(suite_process_guard: None) -> Iterator[str]:
    """The test's own token in the environment; when it ends, nothing it started is left."""
    mark = uuid.uuid4().hex
    before = set(suite_processes())
    old = os.environ.get(MARK_VAR)
    os.environ[MARK_VAR] = mark
    try:
        yield mark
    finally:
        _set(MARK_VAR, old)

    def leftovers() -> list[Proc]:
        return [p for key, p in suite_processes(mark).items() if key not in before and key not in _state.exempt]

    left = _settle(leftovers)
    if left:
        _kill(left)
        pytest.fail("process hygiene: this test left these processes running after it ended "
                    "(now SIGKILLed):\n  " + "\n  ".join(p.describe() for p in left), pytrace=False)
