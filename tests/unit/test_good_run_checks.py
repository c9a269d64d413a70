"""The checks a good run passed, kept in its record (train.good.json) for a rollback to verify
it with: read back typed, absent from an older record (which still reads), and merged with the
given verify's timing, its log the run's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opsrunner.modules.rollback import checks_for
from opsrunner.remote.goodrun import read_good

GIVEN: dict[str, Any] = {
    "processes": 1, "log": "/new/train.log", "log_min_bytes": 1, "log_regex": "ready: new",
    "log_not_regex": "Traceback", "fail_grace": 3, "within": 5, "stable_for": 2}
#: A good run's record as written before its checks were kept.
OLDER: dict[str, Any] = {
    "release": None, "argv": ["/bin/sleep", "1000"], "env": {}, "chdir": None, "log": "/old/train.log",
    "umask": None, "pid": 10, "start": 20, "launched_at": 1.0, "verified_at": 2.0, "boot_id": "b"}


def _good(tmp_path: Path, record: dict[str, Any]) -> dict[str, Any]:
    (tmp_path / "train.good.json").write_text(json.dumps(record))
    good = read_good(str(tmp_path / "train.pid"))
    assert good is not None
    return dict(good)


def test_an_older_record_reads_as_before_without_checks(tmp_path: Path) -> None:
    good = _good(tmp_path, OLDER)
    assert "checks" not in good and good["log"] == "/old/train.log" and good["argv"] == OLDER["argv"]


def test_recorded_checks_read_back_with_their_types_only(tmp_path: Path) -> None:
    checks = {"processes": 2, "log": "/old/train.log", "log_regex": "^up$", "gpu_min_memory_mb": 1.5,
              "gpus": [0, 1], "log_exists": True, "min_processes": True, "port": "80", "within": 9, "env": "x"}
    good = _good(tmp_path, {**OLDER, "checks": checks})
    assert good["checks"] == {"processes": 2, "log": "/old/train.log", "log_regex": "^up$",
                              "gpu_min_memory_mb": 1.5, "gpus": [0, 1], "log_exists": True}
    assert "checks" not in _good(tmp_path, {**OLDER, "checks": ["processes"]})


def test_a_relaunched_run_is_verified_with_its_recorded_checks_and_the_given_timing() -> None:
    recorded = {"processes": 1, "log": "/old/train.log", "log_min_bytes": 1, "log_regex": "^up$",
                "log_not_regex": "Traceback"}
    check, note = checks_for(GIVEN, {"log": "/old/train.log", "checks": recorded})
    assert check == {**recorded, "fail_grace": 3, "within": 5, "stable_for": 2}
    assert note == " with the checks of its good run (log /old/train.log, log_regex ^up$)"
    same = {k: v for k, v in GIVEN.items() if k not in ("fail_grace", "within", "stable_for")}
    assert checks_for(GIVEN, {"log": "/new/train.log", "checks": same})[1] == ""
    _, fewer = checks_for({**GIVEN, "gpu_min_memory_mb": 100},
                          {"log": "/new/train.log", "checks": same})
    assert fewer == " with the checks of its good run (without gpu_min_memory_mb)"


def test_an_older_records_run_is_verified_with_the_given_checks_and_its_own_log() -> None:
    check, note = checks_for(GIVEN, {"log": "/old/train.log"})
    assert check == {**GIVEN, "log": "/old/train.log"} and note == " with its own log (/old/train.log)"
    assert checks_for({"processes": 1}, {"log": "/old/train.log"}) == ({"processes": 1}, "")
