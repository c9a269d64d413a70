"""A rollback asked for by hand that finds nothing to roll back to fails (exit 2), as one that
finds no release before current does: an operator who got nothing rolled back must not read
success. The restart's own rollback (its rescue) still only says it: its `fail` task fails
the run (tests/modules/test_releases_rollback.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, write_inventory
from tests.helpers import cli


def test_a_rollback_by_hand_with_no_last_good_run_fails(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    write_inventory(tmp_path / "inv.yml", {"localhost": {"connection": "local"}}, groups={"trainers": ["localhost"]},
                    all_vars={"pidfile": str(demo / "train.pid"), "log_path": str(demo / "train.log"),
                              "kill_pattern": "", "code_dest": str(demo / "code")})
    res = cli("play", str(ROOT / "playbooks" / "rollback.yml"), "-i", str(tmp_path / "inv.yml"), "--no-color")
    assert res.rc == 2, res.out + res.err
    assert (f"fatal: [localhost]: FAILED! => no rollback: no last good run is recorded for this job "
            f"({demo / 'train.good.json'} is missing)") in res.out, res.out
