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


@pytest.mark.parametrize("server", sorted(STARTERS))
def test_a_fixture_server_dies_with_the_pytest_that_started_it(server: str, tmp_path: Path) -> None:
    if server == "postgres" and pg.find_bindir() is None:
        pytest.skip("no PostgreSQL binaries (tests/setup_postgres.sh installs them)")
    owner = _owner(STARTERS[server], tmp_path / server)
    pid = start = None
    used = None
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line, owner.stderr.read() if owner.stderr else ""
        pid, used = int(line.split()[0]), Path(line.split()[1])
        start = _start_ticks(pid)
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
                "print(line.proc.pid, flush=True)")
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
