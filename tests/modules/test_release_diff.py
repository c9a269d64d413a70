"""deploy_code with releases: -D shows what the new release changes against the current one
(it showed nothing), in check mode without touching the target; a release made from
uncommitted changes says its commit does not name its code."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import write_yaml
from tests.helpers import cli


def _play(tmp_path: Path, src: Path, dest: Path, *flags: str) -> tuple[int, str]:
    inv = write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"box": {"connection": "local"}}}})
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"name": "deploy", "deploy_code": {
        "src": str(src), "dest": str(dest), "releases": True}}]}])
    res = cli("play", str(pb), "-i", str(inv), "--no-history", *flags, cwd=tmp_path)
    return res.rc, res.out + res.err


def test_a_release_diff_against_the_current_one_in_check_and_real_runs(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "train.py").write_text("lr = 0.1\nsteps = 10\n")
    (src / "old.cfg").write_text("x\n")
    assert _play(tmp_path, src, dest)[0] == 0
    first = os.readlink(dest / "current")

    (src / "train.py").write_text("lr = 0.2\nsteps = 10\n")
    (src / "old.cfg").unlink()
    (src / "new.cfg").write_text("y\n")
    rc, out = _play(tmp_path, src, dest, "-C", "-D")
    assert rc == 0, out
    shown = dest / "current"
    assert f"--- {shown}/train.py (before)" in out and f"+++ {shown}/train.py (after)" in out, out
    assert "-lr = 0.1" in out and "+lr = 0.2" in out
    assert f"+++ {shown}/new.cfg (after)" in out and "+y" in out
    assert f"deleted: {shown}/old.cfg" in out
    assert os.readlink(dest / "current") == first  # check mode: nothing changed
    assert (dest / "current" / "train.py").read_text() == "lr = 0.1\nsteps = 10\n"

    rc, out = _play(tmp_path, src, dest, "-D")
    assert rc == 0, out
    assert "-lr = 0.1" in out and "+lr = 0.2" in out and f"deleted: {shown}/old.cfg" in out
    assert os.readlink(dest / "current") != first
    assert (dest / "current" / "train.py").read_text() == "lr = 0.2\nsteps = 10\n"

    rc, out = _play(tmp_path, src, dest, "-D")  # up to date: no diff
    assert rc == 0 and "(before)" not in out, out


def test_a_release_of_uncommitted_changes_says_so(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "train.py").write_text("lr = 0.1\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(src), *argv], check=True, env=env)
    rc, out = _play(tmp_path, src, dest)
    assert rc == 0 and "uncommitted" not in out, out
    (src / "train.py").write_text("lr = 0.3\n")
    rc, out = _play(tmp_path, src, dest)
    assert rc == 0, out
    assert "src has uncommitted changes: the release is not the code of its commit" in out, out
