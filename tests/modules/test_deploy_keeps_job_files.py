"""deploy_code `delete: true` into a folder that also holds the job's own files (its pidfile,
lock and records beside the code): the run must not delete the lock it holds, nor what tells
the next run which job is running. A local host, real processes."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import pids_with, write_yaml
from tests.helpers import cli


def test_delete_keeps_the_files_of_the_job_this_run_locked(tmp_path: Path, cleanup_marker: str) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "train.py").write_text("print('v1')\n")
    pidfile = dest / "train.pid"
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "localhost", "tasks": [
        {"name": "lock", "job_lock": {"pidfile": str(pidfile)}},
        {"name": "deploy", "deploy_code": {"src": f"{src}/", "dest": str(dest), "delete": True}},
        {"name": "launch", "launch_detached": {"argv": ["sleep", cleanup_marker], "pidfile": str(pidfile),
                                               "log": str(dest / "train.log")}},
    ]}])
    first = cli("play", str(pb), "--no-history", cwd=tmp_path)
    assert first.rc == 0, first.out
    (src / "train.py").write_text("print('v2')\n")
    (dest / "stale.py").write_text("old\n")  # a file the source no longer has: deleted
    second = cli("play", str(pb), "--no-history", cwd=tmp_path)
    assert second.rc == 0, second.out
    assert "deleted 1: stale.py" in second.out, second.out
    kept = "kept train.launch.json, train.lock, train.log, train.pid (the files of a job this run holds the lock of)"
    assert kept in second.out, second.out
    assert not (dest / "stale.py").exists() and pidfile.exists() and (dest / "train.launch.json").exists()
    assert "already running as pid" in second.out  # the next run still knows its job
    assert pids_with(cleanup_marker) == [int(pidfile.read_text())]
