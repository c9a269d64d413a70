"""What only a real container shows: the LXC rehearsal commands of docs/getting-started.md, run as written
against the suite's container, and kill_old inside the container never reaching the host
side (lxc-attach, the ssh session, this machine's own processes)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import lxc as lxc_rig
from tests.conftest import ROOT, marked_host, pids_with, vars_for, wait_for, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends


def _rehearsal_block() -> list[str]:
    text = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    (block,) = [b for b in blocks if "inventory/examples/lxc.yml" in b]
    return block.splitlines()


@pytest.mark.lxc
def test_docs_lxc_rehearsal_commands(lxc: lxc_rig.Container) -> None:
    """Each line as docs/getting-started.md has it, with two substitutions: the suite's container for
    `ct200`, and the interpreter running these tests for `.venv/bin/opsrunner`. The line that
    makes the container is the script tests/lxc.py made the suite's container with."""
    lines = _rehearsal_block()
    make = [line for line in lines if "make_container.sh" in line]
    assert len(make) == 1 and make[0].split()[:3] == ["sh", str(lxc_rig.MAKE_CONTAINER.relative_to(ROOT)), "ct200"]
    demo = "/root/opsrunner-demo/code/train.py"
    outputs = []
    try:
        for line in lines:
            if line in make:
                continue
            command = line.replace("ct200", lxc.name).replace(".venv/bin/opsrunner", f"{sys.executable} -m opsrunner")
            proc = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)))
            assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            outputs.append(proc.stdout)
        assert any(out.startswith("Python 3.") for out in outputs)
        restart, status, stop = outputs[-3:]
        assert "launched pid" in restart and re.search(r"lxc-host\s+: ok=\d+ .*failed=0", restart), restart
        assert "all checks passed: processes=1" in status
        assert "killed 1:" in stop
        assert [p for p in pids_with(demo) if lxc.target_pid(p) is not None] == []
    finally:
        for pid in pids_with(demo):
            if lxc.target_pid(pid) is not None:  # the container's demo only, never this machine's
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.lxc
def test_kill_old_in_the_container_never_selects_the_host_side(tmp_path: Path, request: pytest.FixtureRequest,
                                                               lxc: lxc_rig.Container, cleanup_marker: str) -> None:
    """The pattern matches a job in the container, the same command on this machine, and
    every host-side process carrying the call (lxc-attach, the ssh login shell with the
    agent's source: the agent runs from a folder named after the marker). Only the container's
    job is selected, and the play goes on. The pattern is the marker alone: other test
    sessions' chains and jobs run in the same container, and a pattern such as `ssh` would
    match theirs too (their work folders are named after their tests)."""
    decoy = subprocess.Popen(["sleep", cleanup_marker])  # this machine's own, same command line
    try:
        host = marked_host(vars_for("ssh+lxc-attach", request), request.getfixturevalue("lxc_files") / cleanup_marker,
                           "python3")
        inv = write_inventory(tmp_path / "inv.yml", {"ct": host})
        launch = write_yaml(tmp_path / "launch.yml", [{"hosts": "all", "tasks": [
            {"name": "launch", "launch_detached": {"argv": ["sleep", cleanup_marker]}}]}])
        assert cli("play", str(launch), "-i", str(inv)).rc == 0
        assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 10), pids_with(cleanup_marker)
        (job,) = [p for p in pids_with(cleanup_marker) if lxc.target_pid(p) is not None]
        job_in_ct = lxc.target_pid(job)
        events = tmp_path / "ev.jsonl"
        kill = write_yaml(tmp_path / "kill.yml", [{"hosts": "all", "tasks": [
            {"name": "kill", "kill_old": {"pattern": re.escape(cleanup_marker), "grace": 2}, "timeout": 60},
            {"name": "next", "shell": "echo still here"}]}])
        res = cli("play", str(kill), "-i", str(inv), "--json-events", str(events))
        assert res.rc == 0, res.out + res.err
        ev = read_events(events)
        assert task_ends(ev, "kill")[0]["data"]["pids"] == [job_in_ct]
        assert task_ends(ev, "next")[0]["stdout_tail"] == "still here"
        assert wait_for(lambda: pids_with(cleanup_marker) == [decoy.pid], 5), pids_with(cleanup_marker)
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()


def test_without_lxc_the_container_tests_are_skipped_with_the_reason(tmp_path: Path) -> None:
    """A machine without the LXC tools (here: a PATH that has none of them): every container
    test is skipped, and the summary says exactly why; with OPSRUNNER_TEST_LXC=require they fail."""
    node = "tests/e2e/test_lxc.py::test_docs_lxc_rehearsal_commands"
    env = dict(os.environ, PATH=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("OPSRUNNER_TEST_LXC", None)
    args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node]
    skipped = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "1 skipped" in skipped.stdout
    assert ("LXC container unavailable: not installed: lxc-create, lxc-start, lxc-attach, lxc-info, lxc-destroy, "
            "lxc-config, debootstrap (sh tests/setup_lxc.sh installs lxc and debootstrap)") in skipped.stdout
    required = subprocess.run(args, cwd=ROOT, env={**env, "OPSRUNNER_TEST_LXC": "require"}, capture_output=True,
                              text=True, timeout=120)
    assert required.returncode == 1 and "1 error" in required.stdout, required.stdout
    assert "LXC container required (OPSRUNNER_TEST_LXC=require) but unavailable: not installed" in required.stdout
