"""Two jobs (two pidfiles) deploy releases to one code_dest. Job A's rollback to its plain
deploy's last good run removes `current` only where it names the release A itself last ran
from and no other job runs from it: a `current` that job B's deploy switched to B's running
release, or that B runs through, names what runs and stays."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import kill_marked, wait_for
from tests.modules.conftest import PlayRun, Target, _target_for


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


class Shared:
    """Job A (plain good run, then a release that fails) and job B, sharing code_dest."""

    def __init__(self, target: Target, marker: str) -> None:
        self.target, self.w = target, target.work
        self.dest, self.link = self.w / "code", self.w / "code" / "current"
        for name, body in (("plain", "exec sleep {m}"), ("good", "exec sleep {m}"),
                           # A dies on this release; B runs it
                           ("bad", 'if [ "$1" = A ]; then echo dying; sleep 1; exit 3; fi; exec sleep {m}')):
            folder = self.w / "src" / name
            folder.mkdir(parents=True)
            (folder / "job.sh").write_text(f"#!/bin/sh\necho ready: {name} $1\n{body.format(m=marker)}\n")
            (folder / "job.sh").chmod(0o755)

    def pidfile(self, job: str, folder: str = "") -> Path:
        (self.w / folder).mkdir(exist_ok=True)
        return self.w / folder / f"{job.lower()}.pid"

    def launch(self, job: str, argv0: str, pidfile: Path, chdir: str | None = None,
               deploy: str | None = None, must_pass: bool = True) -> PlayRun:
        tasks: list[dict[str, object]] = []
        if deploy:
            tasks.append({"deploy_code": {"src": f"{self.w}/src/{deploy}/", "dest": str(self.dest), "releases": True}})
            tasks.append({"kill_old": {"pidfile": str(pidfile), "grace": 2}})
        launch: dict[str, object] = {"argv": [argv0, job], "pidfile": str(pidfile), "log": f"{pidfile}.log"}
        if argv0.startswith(str(self.link)):
            launch["release_link"] = str(self.link)
        if chdir:
            launch["chdir"] = chdir
        tasks += [{"launch_detached": launch},
                  {"verify": {"pidfile": str(pidfile), "processes": 1, "stable_for": 2 if deploy else 1,
                              "within": 10, "record_good": True}}]
        run = self.target.play(tasks)
        assert (run.rc == 0) == must_pass, run.out
        return run

    def a_plain_then_failed_release(self) -> str:
        """A's last good run is a plain one; its release launch then fails: that release's name."""
        a = self.pidfile("A")
        self.launch("A", f"{self.w}/src/plain/job.sh", a)
        self.launch("A", f"{self.link}/job.sh", a, deploy="bad", must_pass=False)
        return os.readlink(self.link)

    def roll_back_a(self) -> str:
        run = self.target.play([{"rollback": {"pidfile": str(self.pidfile("A")),
                                              "verify": {"processes": 1, "stable_for": 1, "within": 10}}}])
        assert run.rc == 0, run.out
        return str(run.end("rollback")["msg"]).splitlines()[0]


def _alive(pidfile: Path) -> bool:
    return Path(f"/proc/{int(pidfile.read_text())}").exists()


def test_current_that_another_jobs_deploy_switched_stays(target: Target, cleanup_marker: str) -> None:
    jobs = Shared(target, cleanup_marker)
    try:
        jobs.a_plain_then_failed_release()
        time.sleep(1.1)  # another second: another release name
        b = jobs.pidfile("B")
        jobs.launch("B", f"{jobs.link}/job.sh", b, deploy="good")
        b_release = os.readlink(jobs.link)

        line = jobs.roll_back_a()
        assert line.startswith("rolled back to the last good run's launch (no release: the code deployed in place "
                               "stays), pid ") and line.endswith(", verified"), line
        assert "current removed" not in line and "not what runs" not in line
        assert os.readlink(jobs.link) == b_release  # B's release, which B runs from
        assert _alive(b) and "ready: good B" in Path(f"{b}.log").read_text()
        assert wait_for(lambda: _alive(jobs.pidfile("A")), 5)
    finally:
        kill_marked(cleanup_marker)


@pytest.mark.parametrize("where", ["beside", "elsewhere"])
def test_current_that_another_job_runs_through_stays(target: Target, cleanup_marker: str, where: str) -> None:
    """B runs from the very release A failed on: through the link, its pidfile beside A's (its
    launch record says so), or kept elsewhere with its working directory in the release."""
    jobs = Shared(target, cleanup_marker)
    try:
        failed = jobs.a_plain_then_failed_release()
        b = jobs.pidfile("B", "" if where == "beside" else "other")
        jobs.launch("B", f"{jobs.link}/job.sh", b, chdir=str(jobs.link) if where == "elsewhere" else None)

        line = jobs.roll_back_a()
        kept = f", verified; current ({jobs.link} -> release {failed.split('/')[-1]}) kept: "
        assert kept in line and "current removed" not in line, line
        assert os.readlink(jobs.link) == failed
        assert _alive(b)
    finally:
        kill_marked(cleanup_marker)
