"""A release's verdict judges its code. A run is the code and its settings (its launch, with the
release's own directory taken out, and the verify arguments it was judged by): a failed run
whose settings differ from those the release passed with keeps it "passed", the failure kept
beside it; a failure with the same settings, unknown ones, or of a release never passed makes
it "failed"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opsrunner.remote.goodrun import mark_release, release_verdict, run_settings, verdict_path

CHECKS: dict[str, Any] = {"pidfile": "/w/train.pid", "record_good": True, "budget": 59.0, "processes": 1,
                          "log": "/w/train.log", "log_regex": "ready", "within": 60, "stable_for": 10}


def _launch(release_dir: str, *extra: str, token: str = "s3cr3t") -> dict[str, Any]:
    return {"argv": ["python3", f"{release_dir}/train.py", *extra], "env": {"PYTHONPATH": release_dir,
            "API_TOKEN": token}, "chdir": release_dir, "log": "/w/train.log", "umask": "0022",
            "release_dir": release_dir, "pid": 9}


def _release(tmp_path: Path, name: str = "r1") -> str:
    folder = tmp_path / "releases" / name
    folder.mkdir(parents=True)
    return str(folder)


def test_the_same_launch_and_checks_read_alike_wherever_the_release_is(tmp_path: Path) -> None:
    r1, r2 = _release(tmp_path, "r1"), _release(tmp_path, "r2")
    settings = run_settings(_launch(r1), CHECKS)
    # the good run's launch moved to another release; pidfile, record_good and budget say nothing of the run
    assert run_settings(_launch(r2), {**CHECKS, "budget": 3.5, "record_good": False, "within": 60.0}) == settings
    assert run_settings(_launch(r1, "--crash-after=3"), CHECKS)["launch"] != settings["launch"]
    assert run_settings(_launch(r1, token="other"), CHECKS)["launch"] != settings["launch"]
    assert run_settings(_launch(r1), {**CHECKS, "log_regex": "NEVERMATCHES"})["checks"] != settings["checks"]
    assert "s3cr3t" not in json.dumps(settings)
    assert run_settings(None, None) == {"launch": None, "checks": None}


def test_a_failure_with_other_settings_keeps_a_passed_release_passed(tmp_path: Path) -> None:
    r1 = _release(tmp_path)
    passed = run_settings(_launch(r1), CHECKS)
    assert mark_release(r1, "passed", 9, settings=passed)
    assert mark_release(r1, "failed", 10, "code 1", run_settings(_launch(r1, "--crash-after=3"), CHECKS))
    verdict = release_verdict(r1)
    assert verdict is not None and verdict["state"] == "passed" and verdict["pid"] == 9, verdict
    assert verdict.get("failed_run", {}).get("differs") == ["launch"] and verdict["failed_run"]["pid"] == 10
    assert verdict["failed_run"]["why"] == "code 1" and verdict.get("settings") == passed
    assert oct(Path(verdict_path(r1)).stat().st_mode & 0o777) == "0o600"
    assert mark_release(r1, "failed", 11, "no match", run_settings(_launch(r1), {**CHECKS, "log_regex": "x"}))
    verdict = release_verdict(r1)
    assert verdict is not None and verdict["state"] == "passed"
    assert verdict.get("failed_run", {}).get("differs") == ["checks"]
    # a pass later keeps the failed run it had (the last one with other settings)
    assert mark_release(r1, "passed", 12, settings=passed)
    verdict = release_verdict(r1)
    assert verdict is not None and verdict["pid"] == 12 and verdict.get("failed_run", {}).get("pid") == 11


def test_a_failure_with_the_settings_it_passed_with_or_unknown_ones_condemns_it(tmp_path: Path) -> None:
    r1, r2, r3 = _release(tmp_path, "r1"), _release(tmp_path, "r2"), _release(tmp_path, "r3")
    same = run_settings(_launch(r1), CHECKS)
    assert mark_release(r1, "passed", 9, settings=same)
    assert mark_release(r1, "failed", 10, "code 1", same)
    verdict = release_verdict(r1)
    assert verdict is not None and (verdict["state"], verdict["why"], verdict["pid"]) == ("failed", "code 1", 10)
    assert "failed_run" not in verdict
    # a verdict from before settings were kept: nothing says the failed run's differ
    Path(verdict_path(r2)).write_text(json.dumps({"state": "passed", "at": 1.0, "pid": 7, "why": None}))
    assert mark_release(r2, "failed", 8, "hung", run_settings(_launch(r2, "--x"), CHECKS))
    assert (release_verdict(r2) or {}).get("state") == "failed"
    # never passed: any failure condemns it
    assert mark_release(r3, "failed", 8, "hung", run_settings(_launch(r3, "--x"), CHECKS))
    assert (release_verdict(r3) or {}).get("state") == "failed"
