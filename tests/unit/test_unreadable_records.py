"""Records beside a job and its releases that are there but cannot be used raise Unreadable
(naming the file, with the reason alone in `why`) where a verdict or a message depends on
telling them from absent ones: a hand rollback's saved launch, the launch record that makes a
pid the job and that a passing verify records, a release's verdict, and a release's manifest
in the listing of releases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opsrunner.remote.goodrun import prior_path, record_good, release_verdict, take_prior, verdict_path
from opsrunner.remote.guards import Refused
from opsrunner.remote.jobfiles import load_launch_record, pidfile_paths, trusted_pid
from opsrunner.remote.procs import table
from opsrunner.remote.reads import NotRegular, Unreadable, load_json
from opsrunner.remote.releases import list_releases, manifest_path
from opsrunner.remote.rollback import UNREADABLE, choose_previous, op_rollback, verdict_of

NAME = "20261201T030000Z-aaaaaaa"


@pytest.mark.parametrize(("content", "why"), [
    (b"", "empty"), (b'{"k": ', "not valid JSON ("), (b"[1]", "not a JSON object"),
    (b'{"k": 1}' + b" " * 64, "72 bytes, more than the 64 read at most")])
def test_unreadable_names_the_file_and_keeps_the_reason_alone(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(Unreadable) as caught:
        load_json(str(path), "record", 64)
    assert caught.value.path == str(path)
    assert caught.value.why.startswith(why) and str(caught.value) == f"record {path} is {caught.value.why}"


def test_a_fifo_is_unreadable_as_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular) as caught:
        load_json(str(fifo), "record")
    assert (caught.value.path, caught.value.why) == (str(fifo), "a FIFO, not a regular file: refusing to use it")


def test_a_saved_launch_that_cannot_be_read_raises_and_is_left_in_place(tmp_path: Path) -> None:
    pidfile = str(tmp_path / "train.pid")
    assert take_prior(pidfile) is None
    Path(prior_path(pidfile)).write_text('{"argv": ["cut')
    with pytest.raises(Unreadable, match=f"^rollback's saved launch {prior_path(pidfile)} is not valid JSON"):
        take_prior(pidfile)
    assert Path(prior_path(pidfile)).read_text() == '{"argv": ["cut'
    Path(prior_path(pidfile)).write_text(json.dumps({"argv": ["python", "train.py"], "release": "r"}))
    prior = take_prior(pidfile)
    assert prior is not None and prior["argv"] == ["python", "train.py"]
    assert not os.path.exists(prior_path(pidfile))


def test_a_verdict_that_cannot_be_read_is_never_previous_and_says_why(tmp_path: Path) -> None:
    folder = tmp_path / "releases"
    for name in ("a", "b", "c"):
        (folder / name).mkdir(parents=True)
        Path(verdict_path(str(folder / name))).write_text(json.dumps({"state": "passed", "at": 1.0, "pid": 7}))
    broken = verdict_path(str(folder / "b"))
    Path(broken).write_text('{"state": "pass')
    with pytest.raises(Unreadable):
        release_verdict(str(folder / "b"))
    verdicts = {name: verdict_of(str(folder / name)) for name in ("a", "b", "c")}
    b = verdicts["b"]
    assert b is not None and b["state"] == UNREADABLE
    assert choose_previous(["a", "b", "c"], "c", verdicts) == "a"
    with pytest.raises(ValueError) as refused:
        choose_previous(["b", "c"], "c", verdicts)
    assert f"go back to (b: its verdict file {broken} is unreadable: not valid JSON (" in str(refused.value)
    assert "never verified" not in str(refused.value)


def test_the_listing_says_which_manifest_cannot_be_used(tmp_path: Path) -> None:
    folder = tmp_path / "releases"
    for name in (NAME, "20261202T030000Z-bbbbbbb", "20261203T030000Z-ccccccc"):
        (folder / name).mkdir(parents=True)
    Path(manifest_path(str(folder), NAME)).write_text('{"commit": "aaa')
    Path(manifest_path(str(folder), "20261202T030000Z-bbbbbbb")).write_text(json.dumps({"commit": "bbbbbbb"}))
    listed = list_releases(str(tmp_path))
    assert [r["name"] for r in listed] == [NAME, "20261202T030000Z-bbbbbbb", "20261203T030000Z-ccccccc"]
    assert listed[0]["manifest_problem"].startswith(
        f"release manifest {manifest_path(str(folder), NAME)} is not valid JSON (")
    assert "manifest_problem" not in listed[1] and "manifest_problem" not in listed[2]  # valid; absent


@pytest.fixture
def job(tmp_path: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """A live process, its pid in a pidfile whose launch record is cut short."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "unreadable-record-job"])
    pidfile = str(tmp_path / "train.pid")
    Path(pidfile).write_text(f"{proc.pid}\n")
    Path(pidfile_paths(pidfile)["meta"]).write_text('{"pid": ' + str(proc.pid) + ', "argv": ["cut')
    yield pidfile, proc
    proc.kill()
    proc.wait()


def test_a_launch_record_that_cannot_be_read_is_named_in_the_refusal(
        job: tuple[str, subprocess.Popen[bytes]]) -> None:
    pidfile, proc = job
    meta = pidfile_paths(pidfile)["meta"]
    with pytest.raises(Unreadable, match=f"^launch record {meta} is not valid JSON"):
        load_launch_record(pidfile)
    with pytest.raises(Refused) as refused:
        trusted_pid(pidfile, table())
    assert f"and its launch record {meta} is unreadable (not valid JSON (" in str(refused.value)
    assert "there is no launch record" not in str(refused.value)
    assert trusted_pid(pidfile, table(), "unreadable-record-job") == proc.pid  # a pattern still trusts it


def test_a_launch_record_that_cannot_be_read_cannot_be_recorded_as_good(
        job: tuple[str, subprocess.Popen[bytes]]) -> None:
    pidfile, _ = job
    with pytest.raises(Unreadable) as caught:
        record_good(pidfile)
    assert str(caught.value).startswith("every check passed, but the run cannot be recorded as the last good run: "
                                        f"its launch record {pidfile_paths(pidfile)['meta']} is unreadable (not "
                                        "valid JSON (")
    assert not os.path.exists(pidfile_paths(pidfile)["good"])


def test_a_hand_rollback_refuses_before_stopping_a_job_whose_launch_cannot_be_kept(
        job: tuple[str, subprocess.Popen[bytes]]) -> None:
    """Its launch record unreadable, the running job's launch cannot be kept to be started
    again: the rollback stops nothing (else a failed one would say nothing ran before it)."""
    pidfile, proc = job
    Path(pidfile_paths(pidfile)["good"]).write_text(json.dumps({"argv": [sys.executable, "-c", "pass"]}))
    reply = op_rollback({"pidfile": pidfile, "step": "start", "pattern": "unreadable-record-job"})
    assert reply["outcome"] == "failed"
    assert reply["why"].startswith(f"cannot keep the launch of the running job (pid {proc.pid}) to start it again "
                                   f"should the rollback fail: its launch record {pidfile_paths(pidfile)['meta']} is "
                                   "unreadable (not valid JSON ("), reply["why"]
    assert reply["why"].endswith("); nothing was stopped (stop the job first to roll back without keeping it)")
    assert proc.poll() is None and not os.path.exists(prior_path(pidfile))
