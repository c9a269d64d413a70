"""The command contract of shell/command tasks when the host's long-lived agent runs them
(Connection.run_command): the same outcomes as a bare exec under the watchdog, over local,
ssh, both hostile wrappers and the LXC container."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from opsrunner.connections.base import Connection
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.hostvars import connection_spec
from opsrunner.results import CommandResult
from opsrunner.templating import LazyVars
from tests.conftest import pids_with, wait_for
from tests.contract.test_connection_contract import NASTY
from tests.lxc import TargetSide


@pytest.fixture
def conn(transport_vars: dict[str, Any]) -> Iterator[Connection]:
    """Through the agent on every transport, also behind the wrapper chains where `auto` would
    choose a bare exec: the contract holds there too."""
    factory = ConnectionFactory()
    yield factory.get(connection_spec("target", LazyVars([{**transport_vars, "command_exec": "agent"}])))
    factory.close_all()


def sh(conn: Connection, script: str, **kwargs: Any) -> CommandResult:
    return conn.run_command(["/bin/sh"], script=script, **kwargs)


def test_commands_run_inside_the_agent(conn: Connection) -> None:
    # The shell's parent is the agent's worker for this request, forked by the agent itself.
    res = sh(conn, "cat /proc/$PPID/stat")
    agent = conn.agent()
    assert int(res.stdout.rsplit(")", 1)[1].split()[1]) == agent.pid
    assert sh(conn, "true").rc == 0
    assert agent.starts == 1  # one agent serves every command


def test_stdout_stderr_rc(conn: Connection) -> None:
    res = sh(conn, "echo out; echo err >&2; exit 3")
    assert (res.rc, res.stdout, res.stderr, res.timed_out) == (3, "out\n", "err\n", False)
    assert sh(conn, "exit 0", timeout=5).rc == 0
    assert sh(conn, "kill -TERM $$").rc == 128 + 15  # killed by a signal: 128+N, as a shell reports it


def test_script_and_argv_arrive_byte_for_byte(conn: Connection) -> None:
    assert conn.run_command(["/bin/sh", "-c", 'printf %s "$1"', "sh", NASTY]).stdout == NASTY
    assert sh(conn, "cat <<'EOF'\n" + NASTY + "\nEOF").stdout == NASTY + "\n"


def test_stdin_env_cwd(conn: Connection, side: TargetSide) -> None:
    assert conn.run_command(["cat"], stdin=b"abc\x00\xff").stdout_bytes == b"abc\x00\xff"
    res = conn.run_command(["/bin/sh", "-c", 'echo "$FOO|$BAR"'], env={"FOO": "a b", "BAR": NASTY})
    assert res.stdout == f"a b|{NASTY}\n"
    res = sh(conn, 'echo "$FOO"; read line; echo "got $line"', env={"FOO": "x"}, stdin=b"typed\n")
    assert res.stdout == "x\ngot typed\n"
    assert conn.run_command(["pwd"], cwd=str(side.work)).stdout.strip() == str(side.work)
    res = conn.run_command(["pwd"], cwd=str(side.work / "missing"))
    assert res.rc == 125 and "missing" in res.stderr


def test_no_stdin_is_an_immediate_eof(conn: Connection) -> None:
    res = conn.run_command(["cat"], timeout=10)
    assert (res.rc, res.stdout, res.timed_out) == (0, "", False)


def test_binary_and_large_output(conn: Connection) -> None:
    res = conn.run_command(["/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' 'x'; printf '\\377\\376'"])
    assert len(res.stdout_bytes) == 3000002
    assert res.stdout_bytes.endswith(b"\xff\xfe")


def test_a_large_stdin_the_command_never_reads_does_not_hang(conn: Connection) -> None:
    res = conn.run_command(["true"], stdin=os.urandom(5 << 20), timeout=30)
    assert (res.rc, res.timed_out) == (0, False)
    assert sh(conn, "echo next").stdout == "next\n"  # the agent's stream stayed in step


def test_missing_program(conn: Connection) -> None:
    res = conn.run_command(["/nonexistent/program-xyz"])
    assert res.rc == 127 and "/nonexistent/program-xyz: No such file or directory" in res.stderr


def test_timeout_kills_the_tree_and_keeps_the_output_so_far(conn: Connection, cleanup_marker: str) -> None:
    start = time.monotonic()
    res = sh(conn, f"echo before; sleep {cleanup_marker} & setsid sleep {cleanup_marker} & "
             f"sleep {cleanup_marker}; echo never", timeout=1.5)
    elapsed = time.monotonic() - start
    assert res.timed_out and res.rc == 124
    assert res.stdout == "before\n"
    assert elapsed < 6, elapsed
    assert wait_for(lambda: not pids_with(cleanup_marker), 3), pids_with(cleanup_marker)
    assert sh(conn, "echo next").stdout == "next\n"  # the same agent serves the next command
    assert conn.agent().starts == 1


def test_a_command_that_closes_its_output_is_still_stopped_at_the_deadline(conn: Connection,
                                                                         cleanup_marker: str) -> None:
    res = sh(conn, f"exec >&- 2>&-; sleep {cleanup_marker}", timeout=1.5)
    assert res.timed_out
    assert wait_for(lambda: not pids_with(cleanup_marker), 3), pids_with(cleanup_marker)


def test_background_child_holding_output_ends_at_once_with_a_warning(conn: Connection, cleanup_marker: str) -> None:
    start = time.monotonic()
    res = sh(conn, f"sleep {cleanup_marker} & echo started", timeout=60)
    elapsed = time.monotonic() - start
    assert (res.rc, res.timed_out, res.stdout) == (0, False, "started\n")
    assert elapsed < 8, elapsed
    assert len(res.warnings) == 1, res
    assert f"(sleep {cleanup_marker})" in res.warnings[0] and "launch_detached" in res.warnings[0]
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_closing_the_connection_stops_a_running_command(conn: Connection, cleanup_marker: str) -> None:
    """What Ctrl-C and the end of a run do: the command and what it started are killed."""
    sh(conn, "true")
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["res"] = sh(conn, f"sleep {cleanup_marker} & sleep {cleanup_marker}", timeout=300)
        except Exception as exc:  # the lost agent is reported as a failure, never as success
            box["exc"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 15)
    conn.close()
    thread.join(30)
    assert not thread.is_alive()
    assert "exc" in box or not box["res"].ok, box
    assert wait_for(lambda: not pids_with(cleanup_marker), 15), pids_with(cleanup_marker)
