"""One contract for the Connection interface, run over local, ssh, ssh+1 and ssh+2 hostile wrappers,
and through ssh into the real LXC container with lxc-attach (alone and with both hostile wrappers)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from opsrunner.connections.base import Connection
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.hostvars import connection_spec
from opsrunner.templating import LazyVars
from tests.conftest import pids_with, wait_for
from tests.lxc import TargetSide


@pytest.fixture
def conn(transport_vars: dict[str, Any]) -> Connection:
    factory = ConnectionFactory()
    connection = factory.get(connection_spec("target", LazyVars([transport_vars])))
    yield connection
    factory.close_all()


NASTY = "it's \"quoted\" $HOME `x` ; && || \\ \n newline ünïcödé * ? [a] {b} ~"


def test_run_stdout_stderr_rc(conn: Connection) -> None:
    res = conn.shell("echo out; echo err >&2; exit 3")
    assert (res.rc, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.timed_out


def test_script_arrives_byte_for_byte(conn: Connection) -> None:
    res = conn.run(["/bin/sh", "-c", 'printf %s "$1"', "sh", NASTY])
    assert res.stdout == NASTY
    res = conn.shell("cat <<'EOF'\n" + NASTY + "\nEOF")
    assert res.stdout == NASTY + "\n"


def test_stdin_env_cwd(conn: Connection, side: TargetSide) -> None:
    res = conn.run(["cat"], stdin=b"abc\x00\xff")
    assert res.stdout_bytes == b"abc\x00\xff"
    res = conn.run(["/bin/sh", "-c", 'echo "$FOO|$BAR"'], env={"FOO": "a b", "BAR": NASTY})
    assert res.stdout == f"a b|{NASTY}\n"
    res = conn.run(["pwd"], cwd=str(side.work))
    assert res.stdout.strip() == str(side.work)


def test_binary_and_large_output(conn: Connection) -> None:
    res = conn.run(["/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' 'x'; printf '\\377\\376'"])
    assert len(res.stdout_bytes) == 3000002
    assert res.stdout_bytes.endswith(b"\xff\xfe")
    assert "\ufffd" in res.stdout  # lenient text view, bytes kept exact


def test_timeout_kills_command_and_children(conn: Connection, cleanup_marker: str) -> None:
    start = time.monotonic()
    res = conn.shell(f"sleep {cleanup_marker} & sleep {cleanup_marker}; echo never", timeout=1.5)
    elapsed = time.monotonic() - start
    assert res.timed_out
    assert elapsed < 6
    assert "never" not in res.stdout
    assert wait_for(lambda: not pids_with(cleanup_marker), 3), pids_with(cleanup_marker)


def test_timeout_kills_setsid_escapee(conn: Connection, cleanup_marker: str) -> None:
    res = conn.shell(f"setsid sleep {cleanup_marker} & sleep {cleanup_marker}", timeout=1.5)
    assert res.timed_out
    assert wait_for(lambda: not pids_with(cleanup_marker), 3), pids_with(cleanup_marker)


def test_background_child_holding_output_ends_at_once_with_a_warning(conn: Connection, cleanup_marker: str) -> None:
    """The command exits while a background child still holds its stdout: the call returns
    at once (not at the deadline), naming the child, which is killed."""
    start = time.monotonic()
    res = conn.shell(f"sleep {cleanup_marker} & echo started", timeout=60)
    elapsed = time.monotonic() - start
    assert not res.timed_out and res.rc == 0
    assert res.stdout == "started\n"
    assert elapsed < 8, elapsed
    assert len(res.warnings) == 1, res
    assert f"(sleep {cleanup_marker})" in res.warnings[0] and "launch_detached" in res.warnings[0]
    assert "[opsrunner]" not in res.stderr
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_exit_code_without_timeout_watchdog(conn: Connection) -> None:
    assert conn.shell("exit 0", timeout=5).rc == 0
    assert conn.shell("exit 7", timeout=5).rc == 7


def test_put_get_roundtrip_and_mode(conn: Connection, side: TargetSide) -> None:
    dest = side.work / "sub" / "file.bin"
    dest.parent.mkdir()
    content = os.urandom(200_000)
    assert conn.put(content, str(dest), mode=0o750).rc == 0
    assert dest.read_bytes() == content
    assert dest.stat().st_mode & 0o777 == 0o750
    got = conn.get(str(dest))
    assert got.stdout_bytes == content
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".opsrunner")]


def test_put_streams_a_large_file(conn: Connection, side: TargetSide, tmp_path: Path) -> None:
    src = tmp_path / "big.src"
    with src.open("wb") as fh:
        for _ in range(25):
            fh.write(os.urandom(1 << 20))
    dest = side.work / "big.dst"
    with src.open("rb") as fh:
        assert conn.put(fh, str(dest)).rc == 0
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()


def test_missing_program(conn: Connection) -> None:
    res = conn.run(["/nonexistent/program-xyz"])
    assert res.rc != 0
