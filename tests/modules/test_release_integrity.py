"""Release files are hard links shared between releases: a file edited in place is never
linked into a new release, and a rollback refuses a release whose files changed since its
deploy (before it stops anything)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import pytest
import yaml

from opsrunner.connections import ops
from opsrunner.connections.base import Connection, ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.connections.ops import AgentOp
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import TaskContext
from opsrunner.modules.codefiles import collect, tar_of
from opsrunner.modules.releasing import deploy_release
from tests.conftest import ROOT, kill_marked, pids_with, wait_for, write_inventory, write_yaml
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import BAD_RELEASES, Job, module_ends, process


@pytest.fixture
def target(edge_target: Target) -> Target:
    """Each restart here takes seconds of verify windows: the role is run locally, over ssh
    through the longest hostile wrapper chain, and through that chain inside the real LXC
    container (conftest's edge_target), not over every transport."""
    return edge_target


if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import ReleaseArgs


class EditsBaseFirst(TaskContext):
    """A task context that appends to a file of the current release right before the release
    op: an edit in place between deploy_code's stat and the making of the release."""

    edit: Path | None = None

    def agent(self, op: AgentOp[Any, Any], request: Any, timeout: float | None = None,
              payload: IO[bytes] | None = None) -> Any:
        if op is ops.RELEASE and self.edit is not None:
            with self.edit.open("a") as fh:
                fh.write("HOTFIX\n")
            self.edit = None
        return super().agent(op, request, timeout=timeout, payload=payload)


@pytest.fixture
def local_connection() -> Iterator[Connection]:
    factory = ConnectionFactory()
    try:
        yield factory.get(ConnectionSpec(name="t", kind="local"))
    finally:
        factory.close_all()


def _deploy(ctx: TaskContext, src: Path, dest: Path) -> dict[str, Any]:
    _, files = collect(src, str(dest), [], None)
    return dict(deploy_release(ctx, {"src": str(src), "dest": str(dest)}, src, files).data)


def test_a_base_file_edited_after_the_stat_is_sent_not_linked(local_connection: Connection, tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "app"
    src.mkdir()
    (src / "train.py").write_text("print('v1')\n")
    (src / "config.txt").write_text("lr=0.1\n")
    ctx = EditsBaseFirst(host="t", task=cast(Any, None), connection=local_connection, variables={})
    first = _deploy(ctx, src, dest)["release"]
    (src / "config.txt").write_text("lr=0.2\n")
    ctx.edit = dest / "releases" / first / "train.py"
    data = _deploy(ctx, src, dest)
    second = data["release"]
    assert second != first and data["changed_files"] == ["config.txt", "train.py"]
    new, old = dest / "releases" / second / "train.py", dest / "releases" / first / "train.py"
    assert new.read_text() == "print('v1')\n" and old.read_text() == "print('v1')\nHOTFIX\n"
    assert not os.path.samefile(new, old)
    manifest = json.loads((dest / "releases" / f"{second}.json").read_text())
    assert manifest["sha256"] == {"config.txt": hashlib.sha256(b"lr=0.2\n").hexdigest(),
                                  "train.py": hashlib.sha256(b"print('v1')\n").hexdigest()}


def test_the_release_op_refuses_to_link_a_file_whose_digest_changed(local_connection: Connection,
                                                                    tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "app"
    src.mkdir()
    (src / "train.py").write_text("print('v1')\n")
    ctx = TaskContext(host="t", task=cast(Any, None), connection=local_connection, variables={})
    first = _deploy(ctx, src, dest)["release"]
    edited_since: ReleaseArgs = {"dest": str(dest), "name": "20990101T000000Z", "files": {"train.py": 0o644},
                                 "sha256": {"train.py": hashlib.sha256(b"print('v0')\n").hexdigest()},
                                 "base": first}
    with pytest.raises(ModuleFailure) as failed, tar_of([]) as nothing_sent:
        ctx.agent(ops.RELEASE, edited_since, payload=nothing_sent)
    assert "changed since they were compared, not linked: train.py" in str(failed.value)
    assert failed.value.data["stale"] == ["train.py"]
    assert sorted(p.name for p in (dest / "releases").iterdir()) == [first, f"{first}.json"]
    assert os.readlink(dest / "current") == f"releases/{first}"


def test_a_rollback_refuses_a_release_edited_in_place_and_stops_nothing(target: Target,
                                                                        cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        first = job.good()["release"]
        job.write_src("v2")
        (job.src / "v2" / "config.txt").write_text("lr=0.2\n")  # train.py unchanged: hard-linked
        rc, out, _ = job.play("restart_training.yml", code_src=str(job.src / "v2"))
        assert rc == 0, out
        second = job.good()["release"]
        releases = job.demo / "code" / "releases"
        assert second != first and os.path.samefile(releases / first / "train.py", releases / second / "train.py")
        pid = target.host_pid(job.demo / "train.pid")
        with (job.demo / "code" / "current" / "train.py").open("a") as fh:
            fh.write("HOTFIX = 1\n")  # the older release's train.py changes too: the same inode

        rc, out, events = job.play("rollback.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert refused["status"] == "failed"
        assert refused["msg"] == (f"rollback failed: refusing to roll back to release {first}: "
                                  f"{releases / first / 'train.py'} was changed in place since release {first} was "
                                  "deployed (its files are hard links shared with other releases; deploy a fix "
                                  "instead of editing one in place)"), refused["msg"]
        assert job.running() == [pid]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{second}"
    finally:
        kill_marked(cleanup_marker)


def _rollback_task(job: Job) -> dict[str, Any]:
    return {"name": "Roll back", "rollback": {"pidfile": str(job.demo / "train.pid"), "grace": 3,
                                              "verify": {"processes": 1, "within": 10, "stable_for": 1}}}


def test_a_rollback_to_a_missing_release_stops_nothing_also_in_check_mode(target: Target,
                                                                          cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        pid = target.host_pid(job.demo / "train.pid")
        shutil.rmtree(job.demo / "code" / "releases" / good)
        gone = (f"rollback failed: the last good run's release {good} is gone "
                f"({job.demo}/code/releases/{good} is missing)")
        for args in (["--check"], []):
            run = target.play([_rollback_task(job)], *args)
            assert run.rc == 2, run.out
            assert run.end("Roll back")["msg"] == gone
            assert job.running() == [pid]
            assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"
    finally:
        kill_marked(cleanup_marker)


def test_a_relaunch_that_fails_switches_current_back(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        job.write_src("broken", BAD_RELEASES["fails_to_start"])
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "broken"))
        assert rc == 2, out
        broken = module_ends(events, "deploy_code")[0]["data"]["release"]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"

        rc, out, events = job.play("rollback.yml", "-e", f"release={broken}")
        assert rc == 2, out
        (failed,) = module_ends(events, "rollback")
        assert failed["msg"].startswith(f"rollback to release {broken} (no git commit) failed: "), failed["msg"]
        assert "code 1" in failed["msg"] and failed["msg"].endswith(f"; current switched back to {good}")
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"
    finally:
        kill_marked(cleanup_marker)


def test_a_rollback_with_nothing_to_do_puts_current_back_on_the_good_release(target: Target,
                                                                              cleanup_marker: str) -> None:
    """A deploy switched current to a new release, then the restart failed before the good run
    was stopped: the next launch through current must not start the unverified release."""
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        pid = target.host_pid(job.demo / "train.pid")
        job.write_src("v2", BAD_RELEASES["crashes"])
        deploy = {"name": "Deploy", "deploy_code": {"src": str(job.src / "v2"), "dest": f"{job.demo}/code",
                                                    "releases": True, "pidfile": str(job.demo / "train.pid")}}
        auto = _rollback_task(job)
        auto["rollback"]["auto"] = True
        run = target.play([deploy, auto])
        assert run.rc == 0, run.out
        new = run.end("Deploy")["data"]["release"]
        assert new != good
        assert run.end("Roll back")["msg"] == (f"no rollback needed: the last good run (release {good} (no git "
                                               f"commit), pid {(job.demo / 'train.pid').read_text().strip()}) is "
                                               f"still running; nothing was stopped; current switched back from "
                                               f"{new} to {good}")
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good}"
        assert job.running() == [pid]
    finally:
        kill_marked(cleanup_marker)


def test_env_paths_through_current_name_the_real_release_also_after_a_rollback(target: Target,
                                                                                cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    code = f"{job.demo}/code"
    job.vars["train_env"] = {**job.vars["train_env"], "CODE_HOME": f"{code}/current",
                             "EXTRA_PATHS": f"{code}/current/lib:/opt/other"}
    try:
        assert job.play("restart_training.yml")[0] == 0
        first = job.good()["release"]
        job.write_src("v2")
        (job.src / "v2" / "config.txt").write_text("lr=0.2\n")
        rc, out, _ = job.play("restart_training.yml", code_src=str(job.src / "v2"))
        assert rc == 0, out
        second = job.good()["release"]
        assert second != first
        for release, play in ((second, None), (first, "rollback.yml")):
            if play:
                rc, out, _ = job.play(play)
                assert rc == 0, out
            _, env, _ = process(target.host_pid(job.demo / "train.pid"))
            assert env["CODE_HOME"] == f"{code}/releases/{release}"
            assert env["EXTRA_PATHS"] == f"{code}/releases/{release}/lib:/opt/other"
            assert job.good()["env"]["CODE_HOME"] == f"{code}/releases/{release}"
    finally:
        kill_marked(cleanup_marker)


def test_a_rollback_while_another_run_holds_the_job_says_who_in_its_summary(target: Target,
                                                                             cleanup_marker: str) -> None:
    pidfile = target.work / "train.pid"
    held = target.work / "held"
    holder = target.work / "holder"
    holder.mkdir()
    inv = write_inventory(holder / "inv.yml", {"target": target.host_vars})
    pb = write_yaml(holder / "pb.yml", yaml.safe_dump([{"hosts": "all", "tasks": [
        {"name": "Lock", "job_lock": {"pidfile": str(pidfile)}},
        {"name": "Held", "command": f"touch {held}"},
        {"name": "Stay", "command": f"sleep 30 {cleanup_marker}"}]}]))
    other = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(inv)], cwd=holder,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(held.exists, 60)
        task = {"name": "Roll back", "rollback": {"pidfile": str(pidfile), "auto": True,
                                                  "failed_task": "Launch", "failure": {"msg": "boom"}},
                "register": "rolled_back", "ignore_errors": True}
        report = {"name": "Report", "fail": {"msg": "{{ rolled_back.summary | default('not selected') }}"}}
        run = target.play([task, report])
        assert run.rc == 2, run.out
        rolled = run.end("Roll back")
        assert rolled["status"] == "failed"
        assert rolled["data"]["summary"].startswith("Launch failed: boom; rollback failed too: locked by "), rolled
        assert "another run is restarting this job" in rolled["data"]["summary"]
        assert run.end("Report")["msg"] == rolled["data"]["summary"]
    finally:
        other.terminate()
        other.wait(timeout=60)
        # Over ssh the remote sleep outlives its session for a moment: kill until none is left.
        def all_gone() -> bool:
            kill_marked(cleanup_marker)
            return not pids_with(cleanup_marker)
        assert wait_for(all_gone, 20)
