"""The records beside a job and its releases that are there but cannot be used (cut short,
corrupt) are said to be so, naming the file and why, never taken for absent ones: a hand
rollback's saved launch of what ran before it, the launch record (which makes a pid the job,
and which a passing verify records as the last good run), a release's verdict, and a
release's manifest in a deploy's listing of releases."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, kill_marked, wait_for, write_inventory
from tests.helpers import cli, read_events
from tests.modules.conftest import Target
from tests.modules.test_rb_restore import restart_with
from tests.modules.test_releases_rollback import Job, module_ends

#: A release that cannot start; started while a hand rollback's saved launch is there, it
#: cuts that file short first (as a full disk or a crash mid-write would leave it).
CUTS_THE_SAVED_LAUNCH = (
    "def main(argv=None):\n",
    "def main(argv=None):\n"
    "    saved = os.path.join(os.path.dirname(sys.argv[sys.argv.index('--checkpoint') + 1]), "
    "'train.rollback-prior.json')\n"
    "    if os.path.exists(saved):\n"
    "        with open(saved, 'w') as fh:\n"
    "            fh.write('{\"argv\": [\"cut')\n"
    "    raise SystemExit('bad release: cannot start')\n")

#: A verify of the job that records it as the last good run when it passes; its pattern (the
#: job's run name) makes the pid the job without the launch record.
VERIFY_AND_RECORD = """\
- name: Verify and record
  hosts: trainers
  tasks:
    - name: Verify the job and record it
      verify:
        pidfile: "{{ pidfile }}"
        pattern: "--run-name MARK"
        processes: 1
        record_good: true
"""


@pytest.fixture
def target(edge_target: Target) -> Target:
    return edge_target


def _cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


def _play_text(job: Job, text: str) -> tuple[int, str, list[dict[str, Any]]]:
    """Run a playbook given as text against the job's target, with the job's variables."""
    run = Path(tempfile.mkdtemp(prefix="run", dir=job.target.work))
    (run / "roles").symlink_to(ROOT / "roles")
    (run / "play.yml").write_text(text)
    inv = write_inventory(run / "inv.yml", {"target": job.target.host_vars}, groups={"trainers": ["target"]},
                          all_vars=job.vars)
    events = run / "events.jsonl"
    res = cli("play", str(run / "play.yml"), "-i", str(inv), "--json-events", str(events), "--history",
              str(job.history), cwd=run)
    return res.rc, res.out + res.err, read_events(events)


def test_a_saved_launch_that_cannot_be_read_is_said_to_be_so(target: Target, cleanup_marker: str) -> None:
    """After a failed hand rollback whose saved launch of what ran before is corrupt, the line
    says so (naming the file and why), not that nothing was running before."""
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        bad = restart_with(job, "cuts", CUTS_THE_SAVED_LAUNCH, rc=2)  # rolled back to the good run
        prior = job.demo / "train.rollback-prior.json"
        assert not prior.exists() and len(job.running()) == 1

        rc, out, events = job.play("rollback.yml", "-e", f"release={bad}")
        assert rc == 2, out
        (failed,) = module_ends(events, "rollback")
        line = failed["msg"].split("\n")[0]
        assert f"rollback to release {bad} (no git commit) failed: " in line, line
        assert "nothing was running before the rollback either" not in line, line
        assert (f"; what ran before the rollback was not started again: its saved launch {prior} is unreadable: "
                "not valid JSON (") in line, line
        assert line.endswith("; nothing is running"), line
        assert failed["data"]["prior_error"].startswith(f"its saved launch {prior} is unreadable: not valid JSON")
        assert prior.read_text() == '{"argv": ["cut'  # left for the launch it held to be read by hand
        assert wait_for(lambda: job.running() == [], 5)
    finally:
        kill_marked(cleanup_marker)


def test_a_launch_record_that_cannot_be_read_is_said_to_be_so_when_stopping(target: Target,
                                                                            cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        pid = target.host_pid(job.demo / "train.pid")
        record = job.demo / "train.launch.json"
        _cut_short(record)

        rc, out, events = job.play("stop_training.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "kill_old")
        assert "there is no launch record" not in refused["msg"], refused["msg"]
        assert f"and its launch record {record} is unreadable (not valid JSON (" in refused["msg"], refused["msg"]
        assert "), so nothing shows it is the job; refusing to signal or count it" in refused["msg"], refused["msg"]
        assert job.running() == [pid]
    finally:
        kill_marked(cleanup_marker)


def test_a_verify_that_cannot_record_the_last_good_run_fails_saying_why(target: Target,
                                                                        cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        before = job.good()
        record = job.demo / "train.launch.json"
        _cut_short(record)

        rc, out, events = _play_text(job, VERIFY_AND_RECORD.replace("MARK", cleanup_marker))
        assert rc == 2, out
        (failed,) = module_ends(events, "verify")
        assert failed["status"] == "failed", failed
        assert failed["msg"].startswith("every check passed, but the run cannot be recorded as the last good run: "
                                        f"its launch record {record} is unreadable (not valid JSON ("), failed["msg"]
        assert failed["msg"].endswith("); the last good run recorded before stays the one a rollback starts"), \
            failed["msg"]
        assert job.good() == before
    finally:
        kill_marked(cleanup_marker)


def test_a_verdict_that_cannot_be_read_is_said_to_be_so(target: Target, cleanup_marker: str) -> None:
    """A release whose verdict file is corrupt is never `previous`; the refusal says why."""
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        good1 = job.good()["release"]
        good2 = restart_with(job, "good2")
        pid = target.host_pid(job.demo / "train.pid")
        verdict = job.demo / "code" / "releases" / f"{good1}.verdict.json"
        assert json.loads(verdict.read_text())["state"] == "passed"
        _cut_short(verdict)

        rc, out, events = job.play("rollback.yml")
        assert rc == 2, out
        (refused,) = module_ends(events, "rollback")
        assert refused["msg"].startswith(
            f"rollback failed: no release before the current one ({good2}) passed verify, so there is none to go "
            f"back to ({good1}: its verdict file {verdict} is unreadable: not valid JSON ("), refused["msg"]
        assert "was never verified" not in refused["msg"]
        assert job.running() == [pid]
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good2}"
    finally:
        kill_marked(cleanup_marker)


def test_a_deploy_shows_the_releases_whose_manifest_cannot_be_read(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        rc, out, events = job.play("restart_training.yml")
        assert rc == 0, out
        (deployed,) = module_ends(events, "deploy_code")
        assert "unusable_manifests" not in deployed["data"] and not deployed["warnings"]
        first = job.good()["release"]
        manifest = job.demo / "code" / "releases" / f"{first}.json"
        _cut_short(manifest)

        job.write_src("v2", ('p.add_argument("--save-every", type=int, default=10)',
                             'p.add_argument("--save-every", type=int, default=11)'))
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "v2"))
        assert rc == 0, out
        (deployed,) = module_ends(events, "deploy_code")
        (why,) = deployed["data"]["unusable_manifests"].values()
        assert list(deployed["data"]["unusable_manifests"]) == [first]
        assert why.startswith(f"release manifest {manifest} is not valid JSON ("), why
        assert deployed["warnings"] == [f"release {first}: {why}; a rollback to it is refused (its files cannot be "
                                        "checked)"]
        assert f"[WARNING]: [target] release {first}: release manifest {manifest} is not valid JSON" in out
    finally:
        kill_marked(cleanup_marker)
