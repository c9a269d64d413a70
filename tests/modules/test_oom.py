"""The "OOM killer?" diagnosis, against a real OOM kill in a memory cgroup the test makes.

The cgroup is a child of the test process's own memory cgroup, limited to 128 MiB; the
agent (and so the supervisor and the job) enter it through a wrapper layer. The job then
allocates 512 MiB and the kernel's OOM killer ends it. The cgroup is removed afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import host_vars_for, kill_marked
from tests.lxc import TargetSide
from tests.modules.conftest import Target

LIMIT = 128 * 2**20


def _own_memory_cgroup() -> Path | None:
    """This process's memory cgroup directory (v1 `memory` controller, or v2), if it has one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        num, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        if num == "0" and controllers == "":
            for root in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
                if (root / path.lstrip("/") / "memory.max").exists():
                    return root / path.lstrip("/")
    return None


@pytest.fixture
def oom_cgroup(cleanup_marker: str) -> Iterator[Path]:
    parent = _own_memory_cgroup()
    if parent is None or not os.access(parent, os.W_OK):
        pytest.skip(f"no writable memory cgroup for this process ({parent}): cannot make a real OOM kill")
    group = parent / f"opsrunner-test-oom-{cleanup_marker}"
    try:
        group.mkdir()
        if (group / "memory.limit_in_bytes").exists():  # cgroup v1
            (group / "memory.limit_in_bytes").write_text(str(LIMIT))
            with contextlib.suppress(OSError):
                (group / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))
        else:
            (group / "memory.max").write_text(str(LIMIT))
            with contextlib.suppress(OSError):
                (group / "memory.swap.max").write_text("0")
    except OSError as exc:
        with contextlib.suppress(OSError):
            group.rmdir()
        pytest.skip(f"cannot make a limited memory cgroup under {parent}: {exc}")
    try:
        yield group
    finally:
        kill_marked(cleanup_marker)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                group.rmdir()  # empty once the agent that entered it has exited
                break
            time.sleep(0.1)


def _oom_play(transport: str, oom_cgroup: Path, marker: str, request: pytest.FixtureRequest, tmp_path: Path,
              command: str) -> tuple[int, str, dict[str, Any]]:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    base = host_vars_for(transport, server)
    enter = f"/bin/sh -c 'echo $$ > {oom_cgroup}/cgroup.procs && exec \"$@\"' opsrunner-oom-{marker}"
    target = Target({**base, "wrapper": [*(base.get("wrapper") or []), enter]}, TargetSide("python3", Path(), tmp_path))
    log, pid = str(tmp_path / "job.log"), str(tmp_path / "job.pid")
    run = target.play([
        {"name": "launch", "launch_detached": {"command": command, "log": log, "pidfile": pid}},
        {"name": "verify", "verify": {"pidfile": pid, "processes": 1, "log": log, "within": 30,
                                      "stable_for": 10}, "timeout": 60},
    ])
    return run.rc, run.out, run.end("verify")


def _hog(tmp_path: Path, marker: str) -> Path:
    script = tmp_path / "hog.py"
    script.write_text(f"import time\nprint('{marker} allocating', flush=True)\ntime.sleep(1)\n"
                      "x = bytearray(512 * 2**20)\ntime.sleep(30)\n")
    return script


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_oom_killed_job_is_diagnosed_as_the_oom_killer(transport: str, oom_cgroup: Path, cleanup_marker: str,
                                                       request: pytest.FixtureRequest, tmp_path: Path) -> None:
    command = f"python3 {_hog(tmp_path, cleanup_marker)} {cleanup_marker}"
    rc, out, end = _oom_play(transport, oom_cgroup, cleanup_marker, request, tmp_path, command)
    assert rc == 2, out
    assert "was killed by signal 9 (SIGKILL)" in end["msg"], json.dumps(end["data"])
    assert "; OOM killer? " in end["msg"]
    assert "oom_kill event(s)" in end["msg"] or "the kernel log says" in end["msg"]
    assert end["data"]["state"] == "killed by SIGKILL"


def test_oom_killed_command_of_a_shell_job_is_named_too(oom_cgroup: Path, cleanup_marker: str,
                                                        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    # Shell syntax: the job is /bin/sh, which reports its killed command as exit code 137.
    command = f"echo start; python3 {_hog(tmp_path, cleanup_marker)} {cleanup_marker}; exit $?"
    rc, out, end = _oom_play("local", oom_cgroup, cleanup_marker, request, tmp_path, command)
    assert rc == 2, out
    assert "exited with code 137" in end["msg"]
    assert "(128+9: a command it ran was killed by SIGKILL); OOM killer? " in end["msg"]
