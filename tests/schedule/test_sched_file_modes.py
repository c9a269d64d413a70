"""Schedule files hold what a run needs, secrets too (`-e db_password=...`, webhook URLs):
they are written 0600 in a 0700 folder, whatever the umask, also into a folder an earlier
add made world-readable; the units and the crontab line, which others may read, carry none
of those secrets (the run reads them from the schedule file)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import ProjectEnv

SECRET = "pw-0f-the-db-7d1e"
TOKEN = "hook-token-92be"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[ProjectEnv]:
    e = ProjectEnv(tmp_path)
    write_yaml(e.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    old = os.umask(0o022)  # the usual umask, inherited by the commands the test runs
    try:
        yield e
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("installer", [[], ["--cron"]])
def test_schedule_files_are_private_and_units_carry_no_secret(env: ProjectEnv, installer: list[str]) -> None:
    folder = env.root / "schedules"
    res = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "-e", f"db_password={SECRET}",
                  "--at", "daily", "--notify", f"http://127.0.0.1:9/hook?token={TOKEN}", *installer)
    assert res.rc == 0, res.err
    path = folder / "nightly.yml"
    assert SECRET in path.read_text() and TOKEN in path.read_text()  # the run reads them here
    assert _mode(path) == 0o600 and _mode(folder) == 0o700
    assert [p.name for p in folder.iterdir()] == ["nightly.yml"]  # no temporary file left
    others = [*(env.root / "units").glob("*")] if not installer else [env.root / "crontab"]
    assert others
    for other in others:
        assert SECRET not in other.read_text() and TOKEN not in other.read_text(), other


def test_a_world_readable_folder_from_before_is_made_private(env: ProjectEnv) -> None:
    folder = env.root / "schedules"
    folder.mkdir(mode=0o755)
    (folder / "old.yml.tmp").write_text("left by a crash\n")
    (folder / "old.yml.tmp").chmod(0o644)
    assert env.run("schedule", "add", "old", "site.yml", "-i", "inv.yml", "--at", "daily").rc == 0
    assert _mode(folder) == 0o700 and _mode(folder / "old.yml") == 0o600
    assert not (folder / "old.yml.tmp").exists()
