"""A release's manifest records every file's digest, so a release of a thousand files has a
manifest of well over 64 KiB: it is read whole all the same, and the integrity check that a
rollback makes runs on it. A manifest that is there but cannot be used (corrupt, too large)
refuses the rollback, naming it, instead of passing as a release without digests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from opsrunner.remote.releases import MANIFEST_LIMIT
from tests.conftest import kill_marked
from tests.modules.conftest import Target
from tests.modules.test_releases_rollback import Job, module_ends

#: Files in each release: their manifest is about 100 KiB (64 KiB was the old read limit).
FILES = 1200


@pytest.fixture
def target(edge_target: Target) -> Target:
    """Locally, through the longest hostile wrapper chain, and inside the real LXC container."""
    return edge_target


def _many_files(folder: Path) -> None:
    data = folder / "data"
    data.mkdir()
    for i in range(FILES):
        (data / f"shard_{i:05d}.txt").write_text(f"shard {i}\n")


def _two_releases(job: Job) -> tuple[str, str, Path]:
    """A verified release of FILES + 2 files, then a second one sharing all but config.txt."""
    _many_files(job.src / "good")
    rc, out, _ = job.play("restart_training.yml")
    assert rc == 0, out
    first = job.good()["release"]
    job.write_src("v2")
    _many_files(job.src / "v2")
    (job.src / "v2" / "config.txt").write_text("lr=0.2\n")
    rc, out, _ = job.play("restart_training.yml", code_src=str(job.src / "v2"))
    assert rc == 0, out
    second = job.good()["release"]
    releases = job.demo / "code" / "releases"
    assert second != first and os.path.samefile(releases / first / "train.py", releases / second / "train.py")
    manifest = releases / f"{first}.json"
    assert manifest.stat().st_size > 64 << 10
    assert len(json.loads(manifest.read_text())["sha256"]) == FILES + 2
    return first, second, releases


def test_a_large_release_edited_in_place_is_refused(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        first, second, releases = _two_releases(job)
        pid = target.host_pid(job.demo / "train.pid")
        with (job.demo / "code" / "current" / "train.py").open("a") as fh:
            fh.write("HOTFIX = 1\n")  # the older release's train.py changes too: the same inode

        rc, out, events = job.play("rollback.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert refused["msg"] == (f"rollback failed: refusing to roll back to release {first}: "
                                  f"{releases / first / 'train.py'} was changed in place since release {first} was "
                                  "deployed (its files are hard links shared with other releases; deploy a fix "
                                  "instead of editing one in place)"), refused["msg"]
        assert job.running() == [pid]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{second}"
    finally:
        kill_marked(cleanup_marker)


@pytest.mark.parametrize("damage", ["corrupt", "too_large"])
def test_a_rollback_to_a_release_whose_manifest_cannot_be_read_is_refused(target: Target, cleanup_marker: str,
                                                                         damage: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        first, second, releases = _two_releases(job)
        pid = target.host_pid(job.demo / "train.pid")
        manifest = releases / f"{first}.json"
        if damage == "corrupt":
            manifest.write_bytes(manifest.read_bytes()[:-100])  # cut short
            why = "is not valid JSON"
        else:
            with manifest.open("r+b") as fh:
                fh.truncate(MANIFEST_LIMIT + 1)  # sparse: no disk used
            why = f"is {MANIFEST_LIMIT + 1} bytes, more than the {MANIFEST_LIMIT} read at most"

        rc, out, events = job.play("rollback.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert refused["msg"].startswith(f"rollback failed: cannot check the files of release {first}: its release "
                                         f"manifest {manifest} {why}"), refused["msg"]
        assert refused["msg"].endswith("; refusing to roll back to a release whose integrity cannot be "
                                       "checked"), refused["msg"]
        assert job.running() == [pid]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{second}"
    finally:
        kill_marked(cleanup_marker)


def test_a_last_good_run_that_cannot_be_read_is_reported_as_such(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        rc, out, _ = job.play("restart_training.yml")
        assert rc == 0, out
        pid = target.host_pid(job.demo / "train.pid")
        good = job.demo / "train.good.json"
        good.write_bytes(good.read_bytes()[:-10])  # cut short

        rc, out, events = job.play("rollback.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert f"last good run {good} is not valid JSON" in refused["msg"], refused["msg"]
        assert "no last good run is recorded" not in refused["msg"]
        assert job.running() == [pid]
    finally:
        kill_marked(cleanup_marker)
