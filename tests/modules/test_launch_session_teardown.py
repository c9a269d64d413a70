"""A launch behind a wrapper chain whose exec session ends what it leaves behind (a PID
namespace or a cgroup per session, as some container hops do) must not be reported as
running: the launch gets a session of its own, ended at once, and the run's own session
then looks for the job. Local hosts with hostile wrapper scripts (tests/wrappers/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REAPER, WRAPPERS, pids_with, wait_for, write_yaml
from tests.helpers import cli

TREE_REAPER = f"{sys.executable} {WRAPPERS / 'tree_reaper.py'} --"


def _launch(tmp_path: Path, wrapper: str, marker: str) -> tuple[int, str]:
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": {"connection": "local", "wrapper": wrapper}}}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"name": "launch", "launch_detached": {
        "argv": ["sleep", marker], "log": str(tmp_path / "job.log"), "pidfile": str(tmp_path / "job.pid")}}]}])
    res = cli("play", str(pb), "-i", str(inv), "--no-history", cwd=tmp_path)
    return res.rc, res.out + res.err


def test_a_launch_the_hop_tears_down_is_a_failure_not_a_running_job(tmp_path: Path, cleanup_marker: str) -> None:
    rc, out = _launch(tmp_path, TREE_REAPER, cleanup_marker)
    assert rc == 2, out
    assert "but it was gone once its exec session ended: the wrapper chain" in out, out
    assert "tree_reaper.py" in out and "launched pid" in out
    assert pids_with(cleanup_marker) == []  # the truth: nothing of it is running


def test_a_launch_that_outlives_its_session_is_reported_running(tmp_path: Path, cleanup_marker: str) -> None:
    """A hop that ends only its own session's processes (the job has a session of its own)."""
    rc, out = _launch(tmp_path, REAPER, cleanup_marker)
    assert rc == 0, out
    assert "launched pid" in out and "gone once its exec session ended" not in out
    pid = int((tmp_path / "job.pid").read_text())
    assert wait_for(lambda: pids_with(cleanup_marker) == [pid], 5), pids_with(cleanup_marker)


def test_a_launch_session_that_does_not_end_in_time_is_said_not_confirmed(tmp_path: Path, cleanup_marker: str) -> None:
    """A hop that lingers after its command (here 3 s, past the 2 s the close waits): what it
    will do at the session's end is not seen, and the launch says so instead of a verdict."""
    rc, out = _launch(tmp_path, "sh -c '\"$0\" \"$@\"; sleep 3'", cleanup_marker)
    assert rc == 0, out
    assert "had not ended 2s after it was closed: whether the job outlives its session is not known" in out, out
    assert len(pids_with(cleanup_marker)) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="PID namespaces (unshare --pid) need root")
def test_a_pid_namespace_without_its_own_proc_is_refused_not_judged(tmp_path: Path, cleanup_marker: str) -> None:
    """Behind `unshare --pid --fork` (no --mount-proc) the agent's pids are its namespace's
    while /proc is the host's: a launch was reported "ended at once" (pid 4 looked for in the
    host's /proc). Every pid verdict there would be about another process: refused, saying why."""
    rc, out = _launch(tmp_path, "unshare --pid --fork", cleanup_marker)
    assert rc == 2, out
    assert "the target's /proc is not this agent's PID namespace's (the agent runs as pid " in out, out
    assert "must mount a /proc of its own (unshare --pid --fork --mount-proc)" in out
    assert "ended at once" not in out and not (tmp_path / "job.pid").exists()
    assert pids_with(cleanup_marker) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="PID namespaces (unshare --pid) need root")
def test_a_pid_namespace_with_its_own_proc_is_judged_by_its_session(tmp_path: Path, cleanup_marker: str) -> None:
    """With --mount-proc the pids are true; the namespace dies with its exec session (its
    init is the session's command), which the launch's own session shows."""
    rc, out = _launch(tmp_path, "unshare --pid --fork --mount-proc", cleanup_marker)
    assert rc == 2, out
    assert "but it was gone once its exec session ended: the wrapper chain (unshare --pid --fork --mount-proc)" in out
    assert pids_with(cleanup_marker) == []
