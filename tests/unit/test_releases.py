"""Pure rules of releases and rollback: release names, which releases a prune removes, the
previous release, the one-line message, and the release a launch through `current` names."""

from __future__ import annotations

import calendar
import os
import subprocess
from pathlib import Path

import pytest

from opsrunner.modules.releasing import git_commit, release_name
from opsrunner.modules.rollback import failure_text, outcome_text
from opsrunner.remote.releases import prune_plan, release_of, resolve_release_link, switch_link, unique_name
from opsrunner.remote.rollback import choose_previous
from opsrunner.results import Status

WHEN = calendar.timegm((2026, 12, 1, 3, 0, 7, 0, 0, 0))


def test_a_release_is_named_by_its_utc_time_and_commit() -> None:
    assert release_name(WHEN, "1a2b3c4") == "20261201T030007Z-1a2b3c4"
    assert release_name(WHEN, None) == "20261201T030007Z"


def test_two_releases_in_one_second_get_distinct_names_that_sort_by_time(tmp_path: Path) -> None:
    (tmp_path / "20261201T030007Z-1a2b3c4").mkdir()
    second = unique_name(str(tmp_path), "20261201T030007Z-1a2b3c4")
    assert second == "20261201T030007Z.2-1a2b3c4"
    (tmp_path / second).mkdir()
    assert unique_name(str(tmp_path), "20261201T030007Z-1a2b3c4") == "20261201T030007Z.3-1a2b3c4"
    assert unique_name(str(tmp_path), "20261201T030008Z") == "20261201T030008Z"
    assert sorted(["20261201T030007Z.2-1a2b3c4", "20261201T030007Z-1a2b3c4"])[0] == "20261201T030007Z-1a2b3c4"


def test_the_commit_comes_from_the_git_checkout_holding_src(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == (None, False)
    run = {"cwd": tmp_path, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)
    (tmp_path / "train.py").write_text("print(1)\n")
    subprocess.run(["git", "add", "."], **run)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], **run)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], text=True, **run).stdout.strip()
    assert git_commit(tmp_path) == (head, False)
    (tmp_path / "train.py").write_text("print(2)\n")
    assert git_commit(tmp_path) == (head, True)


@pytest.mark.parametrize(("names", "keep", "protected", "doomed", "spared"), [
    (["a", "b", "c"], 5, {}, [], {}),
    (["a", "b", "c", "d"], 2, {}, ["a", "b"], {}),
    (["a", "b", "c", "d"], 2, {"a": "the last good run's"}, ["b"], {"a": "the last good run's"}),
    (["a", "b", "c", "d"], 2, {"b": "in use by pid 7", "d": "current"}, ["a"], {"b": "in use by pid 7"}),
    (["a", "b"], 0, {}, ["a"], {}),  # at least one release always stays
])
def test_prune_keeps_the_newest_and_every_release_a_job_needs(names: list[str], keep: int, protected: dict[str, str],
                                                               doomed: list[str], spared: dict[str, str]) -> None:
    assert prune_plan(names, keep, protected) == (doomed, spared)


def test_previous_is_the_release_before_current() -> None:
    assert choose_previous(["a", "b", "c"], "c") == "b"
    assert choose_previous(["a", "b", "c"], "b") == "a"
    for current, why in ((None, "no current release"), ("a", "no release before a"), ("z", "not among")):
        with pytest.raises(ValueError, match=why):
            choose_previous(["a", "b", "c"], current)


def test_release_of_a_path() -> None:
    assert release_of("/d/releases/R1/train.py", "/d") == "R1"
    assert release_of("/d/releases/R1", "/d") == "R1"
    assert release_of("/d/releases/.R1.opsrunner-tmp-ab/x", "/d") is None
    assert release_of("/d/current/train.py", "/d") is None


def test_a_launch_through_current_names_the_real_release(tmp_path: Path) -> None:
    release = tmp_path / "releases" / "R1"
    release.mkdir(parents=True)
    (tmp_path / "releases" / "R1.json").write_text('{"commit": "abc1234"}')
    link = tmp_path / "current"
    switch_link(str(link), str(release))
    assert os.readlink(link) == "releases/R1"  # relative: the tree may be moved or bind-mounted
    args = {"argv": ["python3", f"{link}/train.py", f"--config={link}", "--x", str(tmp_path / "other")],
            "chdir": str(link), "release_link": str(link)}
    record, problem = resolve_release_link(args)
    assert problem is None
    assert record == {"release": "R1", "release_dir": str(release), "commit": "abc1234"}
    assert args["argv"] == ["python3", f"{release}/train.py", f"--config={release}", "--x", str(tmp_path / "other")]
    assert args["chdir"] == str(release)
    (tmp_path / "releases" / "R2").mkdir()
    switch_link(str(link), str(tmp_path / "releases" / "R2"))  # replaced in one rename
    assert os.readlink(link) == "releases/R2" and not list(tmp_path.glob("current.opsrunner-tmp-*"))
    real = tmp_path / "plain"
    real.mkdir()
    assert "is a directory, not a symlink" in resolve_release_link(
        {"argv": ["x"], "release_link": str(real)})[1]  # type: ignore[typeddict-item,index]


def test_the_one_line_names_what_failed_and_how_the_rollback_went() -> None:
    failed = failure_text("Verify the run is up", {"msg": "processes: expected 1, got 0\ndiagnosis: ...",
                                                   "diagnosis": "the job (pid 9) exited with code 1"})
    assert failed == "Verify the run is up failed: the job (pid 9) exited with code 1"
    assert failure_text("Launch", {"msg": "launched pid 9; it exited at once with code 1\nlast lines"}) == \
        "Launch failed: launched pid 9; it exited at once with code 1"
    assert failure_text(None, None) == ""
    assert outcome_text({"outcome": "rolled_back", "release": "R1", "commit": "abc", "pid": 42}) == \
        (Status.CHANGED, "rolled back to release R1 (commit abc), pid 42, verified")
    assert outcome_text({"outcome": "failed", "release": "R1", "commit": None, "why": "boom"}) == \
        (Status.FAILED, "rollback to release R1 (no git commit) failed too: boom")
    assert outcome_text({"outcome": "failed", "why": "boom"}, after_failure=False) == \
        (Status.FAILED, "rollback failed: boom")
    assert outcome_text({"outcome": "no_good_run", "why": "none recorded"}) == (Status.OK, "no rollback: none recorded")
    would = {"outcome": "would", "release": "R1", "commit": "abc", "stopped": [7], "argv": ["python3", "t.py"]}
    assert outcome_text({**would, "switched_from": "R2"}) == (
        Status.CHANGED, "would roll back to release R1 (commit abc): stop 7, switch current from R2 to it, "
                        "start python3 t.py, verify it")
    assert outcome_text({**would, "switched_from": "R1"})[1].startswith(
        "would roll back to release R1 (commit abc): stop 7, current already points to it, start")


def test_a_launch_that_does_not_go_through_its_release_link_is_refused(tmp_path: Path) -> None:
    """release_link set, but the command, chdir and env all name another copy of the code:
    the job would be recorded (and verified) as the release while it runs something else."""
    release = tmp_path / "app" / "releases" / "r1"
    release.mkdir(parents=True)
    (tmp_path / "app" / "current").symlink_to(release)
    link = str(tmp_path / "app" / "current")
    record, problem = resolve_release_link({"argv": ["python3", str(tmp_path / "app" / "code" / "train.py")],
                                            "chdir": str(tmp_path), "release_link": link})
    assert record == {} and problem is not None and "neither the command, its chdir nor its env" in problem
    args = {"argv": ["python3", f"{link}/train.py"], "release_link": link}
    record, problem = resolve_release_link(args)
    assert problem is None and record["release"] == "r1" and args["argv"][1] == f"{release}/train.py"
