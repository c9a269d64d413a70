"""The checks a good run passed, kept in its record (train.good.json) for a rollback to verify
it with: read back typed, absent from an older record (which still reads), and merged with the
given verify's checks: the run's checks come from its record alone (a given one it lacks is
left out, but for log_not_regex, which can only find a fault), the host's (port, GPUs) are the
given ones; an older record's run is verified with the given checks as they are."""

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
    # a text check by its key alone: it may hold an old secret the run no longer knows to mask
    assert note == " with the checks of its good run (log /old/train.log, log_regex)"
    same = {k: v for k, v in GIVEN.items() if k not in ("fail_grace", "within", "stable_for")}
    assert checks_for(GIVEN, {"log": "/new/train.log", "checks": same})[1] == ""
    # the host's given checks still apply; a run check the record lacks does not (said "without")
    more = {**GIVEN, "gpu_min_memory_mb": 100, "pattern": "^sleep 4343"}
    check, note = checks_for(more, {"log": "/new/train.log", "checks": same})
    assert check == {k: v for k, v in more.items() if k != "pattern"}
    assert note == " with the checks of its good run (without pattern)"


def test_a_given_run_check_the_record_lacks_is_left_out_but_a_fault_check() -> None:
    """A good run recorded with processes 1, verified by a rollback given processes 2, a
    pattern and log_not_regex: the count is the record's, the pattern (which the old run was
    never counted by) is left out, log_not_regex (it can find nothing but a fault) applies;
    the line says with what, not a plain 'verified'."""
    given = {"pattern": "^sleep 4343", "processes": 2, "log_not_regex": "Traceback", "within": 3}
    check, note = checks_for(given, {"log": "/old/train.log", "checks": {"processes": 1, "log": "/old/train.log"}})
    assert check == {"processes": 1, "log": "/old/train.log", "log_not_regex": "Traceback", "within": 3}
    assert note == " with the checks of its good run (log /old/train.log, without pattern, processes 1)"


def test_a_failed_redeploys_new_ready_line_is_not_asked_of_the_run_put_back() -> None:
    """The good run passed with no ready_regex; the redeploy that failed gave one its new code
    was to print (or one that never matches): asking it of the old run made a rollback that
    worked fail too, and left nothing running."""
    recorded = {"processes": 1, "log": "/l/train.log", "log_min_bytes": 1}
    given = {**recorded, "log_regex": "NEVERMATCHES", "within": 5}
    check, note = checks_for(given, {"log": "/l/train.log", "checks": recorded})
    assert check == {**recorded, "within": 5}
    assert note == " with the checks of its good run (without log_regex)"


def test_the_hosts_checks_are_the_given_ones() -> None:
    """A port or GPU check recorded with the good run is the host's, not the run's: a rollback
    given none does not ask for it (a host that lost its GPU fails no healthy relaunch)."""
    recorded = {"processes": 1, "port": 18931, "gpu_min_memory_mb": 100}
    check, note = checks_for({"processes": 1, "within": 2}, {"log": "/l", "checks": recorded})
    assert check == {"processes": 1, "within": 2} and note == ""


def test_an_older_records_run_is_verified_with_the_given_checks() -> None:
    """No checks recorded: the given ones as they are (the given log may be verify's own log,
    not the launch's stdout: swapping in the launch's failed a healthy run)."""
    assert checks_for(GIVEN, {"log": "/old/train.log"}) == (GIVEN, "")
    assert checks_for({"processes": 1}, {"log": "/old/train.log"}) == ({"processes": 1}, "")


def test_a_long_log_path_is_said_whole() -> None:
    """The log a run was verified with names a file: cut at 80 characters it named none (a
    run's directory under a user's projects easily passes that)."""
    log = "/home/trainer/experiments/2026-12/resnet-152-imagenet-lr-sweep/run-0042/logs/train.log"
    assert len(log) > 80
    _, note = checks_for({"log": "/new/train.log", "processes": 1},
                         {"log": log, "checks": {"log": log, "processes": 1}})
    assert note == f" with the checks of its good run (log {log})"
