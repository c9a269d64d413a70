"""What verify needs before any host is touched: at least one check, and a pidfile alone is
one ("the job of this pidfile is running"; it was refused as no check, exit 4). Nothing here
reaches a host: `check` preflights the playbook against a local-connection inventory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_inventory, write_yaml
from tests.helpers import CliResult, cli


def _check(tmp_path: Path, task: dict[str, Any]) -> CliResult:
    write_inventory(tmp_path / "inv.yml", {"h1": {"connection": "local"}})
    write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [task]}])
    return cli("check", "pb.yml", "-i", "inv.yml", cwd=tmp_path)


def test_a_pidfile_alone_is_a_check(tmp_path: Path) -> None:
    res = _check(tmp_path, {"verify": {"pidfile": str(tmp_path / "q.pid")}})
    assert res.rc == 0, res.err
    assert "preflight passed on 1" in res.out


def test_a_verify_without_any_check_names_the_pidfile_among_them(tmp_path: Path) -> None:
    res = _check(tmp_path, {"verify": {"within": 5}})
    assert res.rc == 4, res.out + res.err
    assert ("pb.yml:4:7: verify needs at least one check: processes, min_processes, pidfile (its job running), "
            "log, port or gpu_min_memory_mb (at verify)") in res.err, res.err


def test_a_rollback_verify_without_a_count_checks_its_pidfiles_job(tmp_path: Path) -> None:
    """rollback gives its verify its own pidfile: `verify: {within: 60}` waits for that job running."""
    res = _check(tmp_path, {"rollback": {"pidfile": str(tmp_path / "q.pid"), "verify": {"within": 60}}})
    assert res.rc == 0, res.err
