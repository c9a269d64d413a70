"""clear_cache through a symlinked directory: `link/*` is judged as `link/` is. Both name the
directory the link points to, and the symlink rule refuses both (the link itself, `link`, is
removed as a link). The agent's clear op in this process, in temporary directories only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opsrunner.remote import files

MODES = pytest.mark.parametrize("check", [True, False], ids=["check", "run"])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/precious (must survive, with sub/), tmp/d/cachelink -> precious, tmp/d/realcache."""
    (tmp_path / "precious" / "sub").mkdir(parents=True)
    for name in ("a", "b", "sub/c"):
        (tmp_path / "precious" / name).write_text("keep")
    (tmp_path / "d" / "realcache").mkdir(parents=True)
    for name in ("x", "y"):
        (tmp_path / "d" / "realcache" / name).write_text("cache")
    (tmp_path / "d" / "cachelink").symlink_to(tmp_path / "precious")
    return tmp_path


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def clear(paths: list[str], check: bool) -> Any:
    return files.op_clear({"paths": paths, "check_mode": check})


@MODES
@pytest.mark.parametrize("form", ["cachelink/", "cachelink/*", "cachelink/.*", "cachelink/[ab]", "cache*/*",
                                  "cachelink//*"])
def test_a_glob_through_a_symlinked_directory_is_refused(tree: Path, check: bool, form: str) -> None:
    before = listing(tree)
    reply = clear([f"{tree}/d/{form}"], check)
    assert reply.get("refused") == ["symlink"], reply
    assert "a symlink is removed as a link, never followed" in str(reply["error"])
    assert "(nothing was removed)" in str(reply["error"])
    assert listing(tree) == before


def test_the_refusal_names_the_link_and_where_it_points(tree: Path) -> None:
    reply = clear([f"{tree}/d/cachelink/*"], check=False)
    assert f"rule symlink: '{tree}/d/cachelink/*' lists {tree}/d/cachelink, a symlink to {tree}/precious" \
        in str(reply["error"]), reply
    reply = clear([f"{tree}/d/cache*/*"], check=False)  # the link matched by a wildcard, then listed
    assert f"lists {tree}/d/cachelink, a symlink to {tree}/precious" in str(reply["error"]), reply


@pytest.mark.parametrize("folder", ["cachelink", "realcache", "cachelink/sub", "nothing"])
def test_a_glob_and_a_trailing_slash_are_judged_alike(tree: Path, folder: str) -> None:
    """The same rule, or none, for `folder/` and `folder/*`: only the directory a symlink is
    named as (the last component before the / or the wildcard) is judged as a link."""
    slash = clear([f"{tree}/d/{folder}/"], check=True).get("refused")
    glob = clear([f"{tree}/d/{folder}/*"], check=True).get("refused")
    assert slash == glob, (slash, glob)


def test_the_link_itself_is_removed_as_a_link(tree: Path) -> None:
    reply = clear([f"{tree}/d/cachelink"], check=False)
    assert reply.get("changed") is True, reply
    assert not (tree / "d" / "cachelink").is_symlink()
    assert listing(tree / "precious") == ["a", "b", "sub", "sub/c"]


@MODES
def test_a_glob_in_a_real_directory_still_clears_it(tree: Path, check: bool) -> None:
    reply = clear([f"{tree}/d/realcache/*"], check)
    assert reply.get("changed") is True and "error" not in reply, reply
    assert [r["path"] for r in reply["removed"]] == [f"{tree}/d/realcache/x", f"{tree}/d/realcache/y"]
    assert listing(tree / "d" / "realcache") == ([] if not check else ["x", "y"])
    assert listing(tree / "precious") == ["a", "b", "sub", "sub/c"]


def test_the_path_rules_come_before_the_symlink_rule(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As for `link/`, a link to a directory a path rule protects is refused by that rule."""
    home = tree / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tree / "d" / "homelink").symlink_to(home)
    assert clear([f"{tree}/d/homelink/"], check=True)["refused"] == ["home"]
    assert clear([f"{tree}/d/homelink/*"], check=True)["refused"] == ["wildcard"]
    assert clear([f"{tree}/d/homelink/cache*"], check=True)["refused"] == ["symlink"]  # not a bare wildcard
