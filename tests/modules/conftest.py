"""Run one play of the restart modules against a target over a given transport."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import LXC_TRANSPORTS, TRANSPORTS, side_for, vars_for, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends
from tests.lxc import TargetSide


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
    """A host over one transport, and a scratch directory on it that this machine sees at the
    same path (its own tmp, or the container's shared directory)."""

    host_vars: dict[str, Any]
    side: TargetSide

    @property
    def work(self) -> Path:
        return self.side.work

    @property
    def python(self) -> str:
        return self.side.python

    def trainer_command(self, marker: str, ckpt: Path, *extra: str) -> str:
        return " ".join([self.python, "-u", str(self.side.trainer), "--run-name", marker, "--checkpoint", str(ckpt),
                         *extra])

    def host_pid(self, pidfile: Path) -> int:
        """The pid a pidfile on the target records, as this machine's /proc knows it."""
        return self.side.host_pid(int(pidfile.read_text()))

    def play(self, tasks: list[dict[str, Any]], *args: str, extra_vars: dict[str, Any] | None = None) -> PlayRun:
        run_dir = Path(tempfile.mkdtemp(prefix="run", dir=self.work))
        inv = write_inventory(run_dir / "inv.yml", {"target": self.host_vars})
        pb = write_yaml(run_dir / "pb.yml", yaml.safe_dump([{"hosts": "all", "vars": extra_vars or {},
                                                             "tasks": tasks}], sort_keys=False))
        events = run_dir / "events.jsonl"
        res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *args, cwd=run_dir)
        return PlayRun(res.rc, res.out + res.err, read_events(events))


#: The module tests go into the container once, over exactly what `pct exec` runs; the
#: contract suite and edge_target cover lxc-attach with the hostile wrappers inside it.
MODULE_TRANSPORTS = [t for t in TRANSPORTS if t != "ssh+lxc-attach+reaper+fd_holder"]


@pytest.fixture(params=[t if t not in LXC_TRANSPORTS else pytest.param(t, marks=pytest.mark.lxc)
                        for t in MODULE_TRANSPORTS])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _with_work_dir(host_vars: dict[str, Any], side: TargetSide) -> Target:
    work = side.work / "work"
    work.mkdir()
    return Target(host_vars, replace(side, work=work))


@pytest.fixture
def target(transport_vars: dict[str, Any], side: TargetSide) -> Target:
    return _with_work_dir(transport_vars, side)


def _target_for(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _with_work_dir(vars_for(transport, request), side_for(transport, request, tmp_path))


@pytest.fixture(params=["local", "ssh+reaper+fd_holder",
                        pytest.param("ssh+lxc-attach+reaper+fd_holder", marks=pytest.mark.lxc)])
def edge_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """For logic computed on the target: proven locally, through the longest hostile chain,
    and through that chain inside the real container."""
    return _target_for(str(request.param), request, tmp_path)


@pytest.fixture
def chain_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """The longest chain only: ssh, the session reaper, then the fd holder."""
    return _target_for("ssh+reaper+fd_holder", request, tmp_path)
