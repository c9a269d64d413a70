"""Release manifests and job records are read whole up to a generous limit, and one that is
there but cannot be used is never taken for an absent one where a verdict depends on it:
the releases' order, the commit a launch records, pruning and the last good run."""

from __future__ import annotations

import calendar
import hashlib
import json
import os
from pathlib import Path

import pytest

from opsrunner.remote.goodrun import read_good
from opsrunner.remote.guards import Context
from opsrunner.remote.reads import SMALL_LIMIT, NotRegular, Unreadable, load_json, read_json
from opsrunner.remote.releases import (
    MANIFEST_LIMIT,
    changed_in_place,
    list_releases,
    manifest_path,
    prune,
    release_dir_of,
    resolve_release_link,
    switch_link,
)

OLD, NEW = "20261201T030000Z-aaaaaaa", "20261202T030000Z-bbbbbbb"


def _release(dest: Path, name: str, files: int, created: float) -> Path:
    """A release directory of `files` files and its manifest (as op_release writes it)."""
    folder = dest / "releases" / name
    folder.mkdir(parents=True)
    digests = {}
    for i in range(files):
        (folder / f"f{i:05d}.txt").write_text(f"{i}\n")
        digests[f"f{i:05d}.txt"] = hashlib.sha256(f"{i}\n".encode()).hexdigest()
    manifest = {"name": name, "commit": name.partition("-")[2], "created": created, "files": files,
                "sha256": digests}
    Path(manifest_path(str(dest / "releases"), name)).write_text(json.dumps(manifest))
    return folder


def test_a_json_record_is_absent_or_read_whole_or_unreadable_saying_why(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert load_json(str(path), "record") is None
    path.write_text(json.dumps({"k": "v" * (SMALL_LIMIT * 2)}))
    assert load_json(str(path), "record") == {"k": "v" * (SMALL_LIMIT * 2)}
    for content, why in ((b"", "is empty"), (b'{"k": ', "is not valid JSON"), (b"[1]", "is not a JSON object"),
                         (b'{"k": "\xff"}', "is not valid JSON")):
        path.write_bytes(content)
        with pytest.raises(Unreadable, match=f"^record {path} {why}"):
            load_json(str(path), "record")
        assert read_json(str(path), "record") is None  # where losing the record is safe
    path.write_text('{"k": 1}')
    with pytest.raises(Unreadable, match=f"^record {path} is 8 bytes, more than the 4 read at most$"):
        load_json(str(path), "record", 4)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for read in (load_json, read_json):
        with pytest.raises(NotRegular, match="is a FIFO, not a regular file"):
            read(str(fifo), "record")


def test_releases_with_large_or_unreadable_manifests_keep_their_order_and_commit(tmp_path: Path) -> None:
    _release(tmp_path, OLD, 2, 1000.0)
    new = _release(tmp_path, NEW, 1000, 2000.0)
    manifest = Path(manifest_path(str(tmp_path / "releases"), NEW))
    assert manifest.stat().st_size > SMALL_LIMIT
    assert list_releases(str(tmp_path)) == [{"name": OLD, "commit": "aaaaaaa", "created": 1000.0},
                                            {"name": NEW, "commit": "bbbbbbb", "created": 2000.0}]
    switch_link(str(tmp_path / "current"), str(new))
    record, problem = resolve_release_link({"argv": [f"{tmp_path}/current/f00000.txt"],  # type: ignore[typeddict-item]
                                            "release_link": str(tmp_path / "current")})
    assert problem is None and record["commit"] == "bbbbbbb"
    assert changed_in_place(str(new)) is None
    (new / "f00999.txt").write_text("edited\n")
    assert changed_in_place(str(new)) == f"{new / 'f00999.txt'} was changed in place since release {NEW} was deployed"

    manifest.write_text("{")  # corrupt: the name still tells its time and commit
    listed = list_releases(str(tmp_path))[1]
    assert listed.pop("manifest_problem", "").startswith(f"release manifest {manifest} is not valid JSON (")
    assert listed == {"name": NEW, "commit": "bbbbbbb", "created": calendar.timegm((2026, 12, 2, 3, 0, 0, 0, 0, 0))}
    assert release_dir_of(str(tmp_path), NEW) == (str(new), "bbbbbbb")
    with pytest.raises(ValueError, match=f"^cannot check the files of release {NEW}: its release manifest "
                                         f"{manifest} is not valid JSON"):
        changed_in_place(str(new))
    with manifest.open("r+b") as fh:
        fh.truncate(MANIFEST_LIMIT + 1)
    with pytest.raises(ValueError, match=f"its release manifest {manifest} is {MANIFEST_LIMIT + 1} bytes, more "
                                         f"than the {MANIFEST_LIMIT} read at most; refusing to roll back"):
        changed_in_place(str(new))
    manifest.unlink()
    os.mkfifo(manifest)
    with pytest.raises(ValueError, match="is a FIFO, not a regular file"):
        changed_in_place(str(new))


def test_a_last_good_run_that_cannot_be_read_is_not_taken_for_none_and_prunes_nothing(tmp_path: Path) -> None:
    names = [f"2026120{day}T030000Z" for day in range(1, 5)]
    for day, name in enumerate(names, 1):
        _release(tmp_path, name, 1, float(day))
    switch_link(str(tmp_path / "current"), str(tmp_path / "releases" / names[-1]))
    pidfile = tmp_path / "train.pid"
    assert read_good(str(pidfile)) is None
    good = tmp_path / "train.good.json"
    good.write_text('{"release": "')
    with pytest.raises(Unreadable, match=f"^last good run {good} is not valid JSON"):
        read_good(str(pidfile))
    pruned, spared = prune(str(tmp_path), 1, str(pidfile), Context())
    assert pruned == [] and sorted(spared) == names[:-1]
    assert spared[names[0]].startswith(f"kept: last good run {good} is not valid JSON")
    good.unlink()
    pruned, spared = prune(str(tmp_path), 1, str(pidfile), Context())
    assert pruned == names[:-1] and spared == {}


def test_pruning_keeps_the_newest_release_that_passed_before_current(tmp_path: Path) -> None:
    """Failed deploys in a row push the release a rollback's 'previous' goes to past
    keep_releases: it stays (it was deleted while older failed ones stayed), and an older
    passed one goes."""
    from opsrunner.remote.goodrun import mark_release

    names = [f"2026120{day}T030000Z" for day in range(1, 7)]
    for day, name in enumerate(names, 1):
        _release(tmp_path, name, 1, float(day))
    folder = tmp_path / "releases"
    for name, state in zip(names, ("passed", "failed", "passed", "failed", "failed", "failed"), strict=True):
        assert mark_release(str(folder / name), state, 1, None if state == "passed" else "crashed")
    switch_link(str(tmp_path / "current"), str(folder / names[-1]))
    pruned, spared = prune(str(tmp_path), 2, None, Context())
    assert spared == {names[2]: "the newest that passed verify before current (a rollback's 'previous')"}
    assert pruned == [names[0], names[1], names[3]]
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [names[2], names[4], names[5]]
