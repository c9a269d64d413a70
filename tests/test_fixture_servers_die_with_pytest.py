"""The long-lived servers the suite's fixtures start (PostgreSQL, the sshd, the dashboard) die
with the pytest that started them, also when it is SIGKILLed and runs no teardown
(tests/lifeline.py): a Python process starts one with the fixture's own helper, is SIGKILLed
once the server is up, and the server's pid is gone within seconds (PostgreSQL's temp dir
removed too). The watchdog stops only what it was told of, by pid and while it is the same
process."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import pg
from tests.conftest import ROOT, wait_for

STARTERS = {
    "postgres": "from tests import pg\nserver = pg.start_postgres()\nprint(server.pid, server.root, flush=True)",
    "sshd": "from tests.sshd import start_sshd\nserver = start_sshd(Path(sys.argv[1]))\n"
            "print(server.proc.pid, server.root, flush=True)",
    "dashboard": "from tests.web.dashboard import Project, serving\nblock = serving(Project(Path(sys.argv[1])))\n"
                 "server = block.__enter__()\nprint(server.proc.pid, sys.argv[1], flush=True)",
}


def _alive(pid: int, start: int) -> bool:
    """Process `pid` is the one that started at `start` and has not exited."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] not in "ZXx" and int(fields[19]) == start
    return False


def _start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _owner(code: str, arg: Path) -> subprocess.Popen[str]:
    """The pytest stand-in: runs `code` (with the fixture's helper), then waits to be killed."""
    script = f"import sys, time\nfrom pathlib import Path\n{code}\ntime.sleep(600)\n"
    return subprocess.Popen([sys.executable, "-c", script, str(arg)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _started(owner: subprocess.Popen[str]) -> tuple[int, Path, int]:
    """The server the owner started: its pid, the temp dir it was given, its start time."""
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, owner.stderr.read() if owner.stderr else ""
    pid = int(line.split()[0])
    return pid, Path(line.split()[1]), _start_ticks(pid)


@pytest.mark.parametrize("server", sorted(STARTERS))
def test_a_fixture_server_dies_with_the_pytest_that_started_it(server: str, tmp_path: Path) -> None:
    if server == "postgres" and pg.find_bindir() is None:
        pytest.skip("no PostgreSQL binaries (tests/setup_postgres.sh installs them)")
    owner = _owner(STARTERS[server], tmp_path / server)
    pid = start = None
    used = None
    try:
        pid, used, start = _started(owner)
        named = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        where = os.readlink(f"/proc/{pid}/cwd")
        assert str(used) in named or where.startswith(str(used)), (named, where)  # the temp dir it was given
        if server != "postgres":
            assert used.is_relative_to(tmp_path)
        owner.send_signal(signal.SIGKILL)  # no teardown runs
        owner.wait(30)
        assert wait_for(lambda: not _alive(pid, start), 15), f"{server} pid {pid} still running after its pytest died"
        if server == "postgres":
            assert wait_for(lambda: not used.exists(), 10), f"{used} left behind"
    finally:
        owner.kill()
        owner.wait()
        if pid is not None and start is not None and _alive(pid, start):  # what the old helpers leave
            os.kill(pid, signal.SIGINT if server == "postgres" else signal.SIGKILL)
            wait_for(lambda: not _alive(pid, start), 15)
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        if server == "postgres" and used is not None and used.name.startswith("opsrunner-pg-"):
            shutil.rmtree(used, ignore_errors=True)


def test_the_watchdog_stops_only_the_process_it_was_told_of(tmp_path: Path) -> None:
    """A pid file naming a process whose command line does not name the server's directory
    (another process that took the pid), and a pid whose start time is not the one told: left
    alone, and the watchdog exits."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        pidfile = tmp_path / "data" / "postmaster.pid"
        pidfile.parent.mkdir()
        pidfile.write_text(f"{bystander.pid}\n")
        code = ("from tests.lifeline import Lifeline, start_ticks\nimport signal\nline = Lifeline()\n"
                f"line.watch_pidfile(Path({str(pidfile)!r}), {str(pidfile.parent)!r}, signal.SIGKILL)\n"
                f"line._tell('pid', {bystander.pid}, start_ticks({bystander.pid}) + 1, int(signal.SIGKILL))\n"
                "print(line.pid, flush=True)")
        owner = _owner(code, tmp_path)
        try:
            assert owner.stdout is not None
            watchdog = int(owner.stdout.readline())
            started = _start_ticks(watchdog)
            owner.send_signal(signal.SIGKILL)
            owner.wait(30)
            assert wait_for(lambda: not _alive(watchdog, started), 15)
        finally:
            owner.kill()
            owner.wait()
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def _owner_without_stdin(code: str, arg: Path) -> subprocess.Popen[str]:
    """_owner(), with its stdin closed (a CI step's pytest may have none): os.pipe() then returns 0."""
    script = f"import sys, time\nfrom pathlib import Path\n{code}\ntime.sleep(600)\n"
    return subprocess.Popen(["sh", "-c", 'exec "$0" -c "$1" "$2" 0<&-', sys.executable, script, str(arg)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _naming(word: str) -> list[int]:
    """The pids of the processes whose command line names `word`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if entry.name.isdigit():
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found += (kids := children.get(todo.pop(), []))
        todo += kids
    return found


@pytest.mark.parametrize("server", ["dashboard", "sshd"])
def test_a_fixture_server_dies_with_a_pytest_whose_stdin_is_closed(server: str, tmp_path: Path) -> None:
    """With fd 0 closed the lifeline's pipe gets fd 0: its watchdog still reads it, the server
    starts, and is stopped once pytest is SIGKILLed."""
    owner = _owner_without_stdin(STARTERS[server], tmp_path / server)
    try:
        assert owner.stdout is not None and owner.stderr is not None
        line = owner.stdout.readline()
        assert line, owner.stderr.read()
        pid = int(line.split()[0])
        start = _start_ticks(pid)
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        assert wait_for(lambda: not _alive(pid, start), 15), f"{server} pid {pid} still running after its pytest died"
    finally:
        owner.kill()
        owner.wait()
        for left in _naming(str(tmp_path)):  # what a broken lifeline leaves
            with contextlib.suppress(OSError):
                os.kill(left, signal.SIGKILL)


def test_postgres_dies_with_a_pytest_whose_whole_process_tree_is_killed(tmp_path: Path) -> None:
    """A CI runner that SIGKILLs pytest and every process under it: the watchdog is not one of
    them (reparented), and stops PostgreSQL (daemonized by pg_ctl, not one of them either)."""
    if pg.find_bindir() is None:
        pytest.skip("no PostgreSQL binaries (tests/setup_postgres.sh installs them)")
    owner = _owner(STARTERS["postgres"], tmp_path)
    pid = start = used = None
    try:
        pid, used, start = _started(owner)
        for doomed in [owner.pid, *_descendants(owner.pid)]:
            with contextlib.suppress(OSError):
                os.kill(doomed, signal.SIGKILL)
        owner.wait(30)
        assert wait_for(lambda: not _alive(pid, start), 15), f"postgres pid {pid} still running"
        assert wait_for(lambda: not used.exists(), 10), f"{used} left behind"
    finally:
        owner.kill()
        owner.wait()
        if pid is not None and start is not None and _alive(pid, start):
            os.kill(pid, signal.SIGINT)
            if not wait_for(lambda: not _alive(pid, start), 15):
                os.kill(pid, signal.SIGKILL)
        if used is not None and used.name.startswith("opsrunner-pg-"):
            shutil.rmtree(used, ignore_errors=True)


def test_a_server_whose_pid_file_is_still_empty_when_pytest_dies_is_stopped(tmp_path: Path) -> None:
    """pytest killed after the server created its pid file and before it wrote its pid there:
    the watchdog waits for the pid, stops the server, and only then removes its directory."""
    data = tmp_path / "root" / "data"
    data.mkdir(parents=True)
    pidfile = data / "postmaster.pid"
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-D", str(data)])
    try:
        code = ("from tests.lifeline import Lifeline\nimport signal\n"
                f"line = Lifeline(remove=Path({str(data.parent)!r}))\n"
                f"line.watch_pidfile(Path({str(pidfile)!r}), {str(data)!r}, signal.SIGINT)\n"
                f"Path({str(pidfile)!r}).touch()\nprint(line.pid, flush=True)")
        owner = _owner(code, tmp_path)
        try:
            assert owner.stdout is not None
            assert owner.stdout.readline(), owner.stderr.read() if owner.stderr else ""
            owner.send_signal(signal.SIGKILL)
            owner.wait(30)
        finally:
            owner.kill()
            owner.wait()
        time.sleep(0.3)
        pidfile.write_text(f"{server.pid}\n{data}\n")
        assert wait_for(lambda: server.poll() is not None, 15), "the server is still running"
        assert wait_for(lambda: not data.parent.exists(), 10)
    finally:
        server.kill()
        server.wait()


def test_closing_a_lifeline_twice_closes_no_other_file(tmp_path: Path) -> None:
    """A server's stop() closes its lifeline, and a failed start's cleanup closes it again: the
    second close leaves alone the file that took the pipe's number meanwhile."""
    code = ("from tests.lifeline import Lifeline\nline = Lifeline()\nline.close()\n"
            "spare, other = open(sys.argv[1] + '/spare', 'w'), open(sys.argv[1] + '/other', 'w')\n"
            "line.close()\nother.write('intact')\nother.close()\nprint('done', flush=True)")
    owner = _owner(code, tmp_path)
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline() == "done\n", owner.stderr.read() if owner.stderr else ""
    finally:
        owner.kill()
        owner.wait()
    assert (tmp_path / "other").read_text() == "intact"
