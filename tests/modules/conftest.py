"""Run one play of the restart modules against a target over a given transport."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, host_vars_for, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends

TRAINER = ROOT / "examples" / "demo_trainer" / "train.py"
PY = sys.executable


@dataclass
class PlayRun:
    rc: int
    out: str
    events: list[dict[str, Any]]

    def end(self, task: str) -> dict[str, Any]:
        (found,) = task_ends(self.events, task)
        return found


@dataclass
class Target:
    """A host over one transport, and a scratch directory on it (this machine's tmp)."""

    host_vars: dict[str, Any]
    work: Path

    def play(self, tasks: list[dict[str, Any]], *args: str, extra_vars: dict[str, Any] | None = None) -> PlayRun:
        run_dir = Path(tempfile.mkdtemp(prefix="run", dir=self.work))
        inv = write_inventory(run_dir / "inv.yml", {"target": self.host_vars})
        pb = write_yaml(run_dir / "pb.yml", yaml.safe_dump([{"hosts": "all", "vars": extra_vars or {},
                                                             "tasks": tasks}], sort_keys=False))
        events = run_dir / "events.jsonl"
        res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *args, cwd=run_dir)
        return PlayRun(res.rc, res.out + res.err, read_events(events))


@pytest.fixture
def target(transport_vars: dict[str, Any], tmp_path: Path) -> Target:
    work = tmp_path / "work"
    work.mkdir()
    return Target(transport_vars, work)


def trainer_command(marker: str, ckpt: Path, *extra: str) -> str:
    return " ".join([PY, "-u", str(TRAINER), "--run-name", marker, "--checkpoint", str(ckpt), *extra])


def _target_for(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    server = request.getfixturevalue("sshd") if transport != "local" else None
    work = tmp_path / "work"
    work.mkdir()
    return Target(host_vars_for(transport, server), work)


@pytest.fixture(params=["local", "ssh+reaper+fd_holder"])
def edge_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """For logic computed on the target: proven locally and through the longest hostile chain."""
    return _target_for(str(request.param), request, tmp_path)


@pytest.fixture
def chain_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """The longest chain only: ssh, the session reaper, then the fd holder."""
    return _target_for("ssh+reaper+fd_holder", request, tmp_path)
