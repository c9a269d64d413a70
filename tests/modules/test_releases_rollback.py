"""Releases and automatic rollback with the shipped restart role, over every transport: a good
deploy, then a release that fails to start, one that crashes after a few steps and one that
hangs; each ends with the previous release running again exactly as its verified launch
(argv, env, chdir), one job, exit 2, one line saying so, and both tasks in the history."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TRAINER, kill_marked, pids_with, wait_for, write_inventory
from tests.helpers import cli, read_events, task_ends
from tests.modules.conftest import Target


@pytest.fixture
def target(edge_target: Target) -> Target:
    """Each restart here takes seconds of verify windows: the role is run locally, over ssh
    through the longest hostile wrapper chain, and through that chain inside the real LXC
    container (conftest's edge_target), not over every transport."""
    return edge_target


#: Keys of a job's environment that belong to the session that launched it, not to the launch.
SESSION_KEYS = {"SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "PWD", "OLDPWD", "PYTEST_CURRENT_TEST", "_"}
#: How each bad release goes wrong: its train.py, changed from the demo trainer.
BAD_RELEASES = {
    "fails_to_start": ("def main(argv=None):\n",
                       "def main(argv=None):\n    raise SystemExit('bad release: cannot start')\n"),
    "crashes": ('p.add_argument("--crash-after", type=int, default=0)',
                'p.add_argument("--crash-after", type=int, default=20)'),
    "hangs": ('p.add_argument("--hang-after", type=int, default=0)',
              'p.add_argument("--hang-after", type=int, default=20)'),
}
FAIL = "Fail the restart (what failed, and the rollback)"
ROLL_BACK = "Roll back to the last good run"
LINE = re.compile(r"^(?P<task>.+) failed: (?P<why>.+); rolled back to release (?P<release>\S+) \(no git commit\), "
                  r"pid (?P<pid>\d+), verified$")


class Job:
    """The restart role against one target, with its code under the target's scratch dir."""

    def __init__(self, target: Target, marker: str) -> None:
        self.target, self.marker = target, marker
        self.demo = target.work / "demo"
        self.src = Path(tempfile.mkdtemp(prefix="src", dir=target.work))
        self.history = target.work / "history.db"
        self.vars: dict[str, Any] = {
            "code_src": str(self.src / "good"), "code_dest": f"{self.demo}/code", "releases": True,
            "cache_paths": [f"{self.demo}/cache"], "pidfile": f"{self.demo}/train.pid",
            "log_path": f"{self.demo}/train.log", "kill_grace": 5, "wait_gpu_free": 0,
            "train_command": f"{target.python} -u {self.demo}/code/current/train.py --run-name {marker} "
                             f"--step-time 0.05 --checkpoint {self.demo}/ck.json",
            "train_chdir": f"{self.demo}/code/current",
            "train_env": {"RUN_MARK": marker, "API_TOKEN": "s3cr3t-" + marker[-6:]},
            "ready_regex": "ready: training", "log_grows_within": 1, "verify_within": 10,
            "verify_stable_for": 1, "fail_grace": 3, "deploy_timeout": 60, "stop_timeout": 60,
            "cache_timeout": 60, "start_timeout": 30, "rollback_timeout": 60,
        }
        self.write_src("good")

    def write_src(self, name: str, change: tuple[str, str] | None = None) -> None:
        folder = self.src / name
        folder.mkdir()
        text = TRAINER.read_text()
        if change:
            assert change[0] in text
            text = text.replace(change[0], change[1])
        (folder / "train.py").write_text(text)
        (folder / "config.txt").write_text("lr=0.1\n")  # the same in every release: hard-linked

    def play(self, playbook: str, *args: str, **extra: Any) -> tuple[int, str, list[dict[str, Any]]]:
        run = Path(tempfile.mkdtemp(prefix="run", dir=self.target.work))
        (run / "roles").symlink_to(ROOT / "roles")
        shutil.copy(ROOT / "playbooks" / playbook, run / playbook)
        inv = write_inventory(run / "inv.yml", {"target": self.target.host_vars}, groups={"trainers": ["target"]},
                              all_vars={**self.vars, **extra})
        events = run / "events.jsonl"
        res = cli("play", str(run / playbook), "-i", str(inv), "--json-events", str(events), "--history",
                  str(self.history), *args, cwd=run)
        return res.rc, res.out + res.err, read_events(events)

    def good(self) -> dict[str, Any]:
        good: dict[str, Any] = json.loads((self.demo / "train.good.json").read_text())
        return good

    def running(self) -> list[int]:
        return pids_with(f"--run-name {self.marker}")

    def last_run(self) -> dict[str, Any]:
        res = cli("history", "--json", "-n", "1", "--history", str(self.history))
        (run,) = json.loads(res.out)
        return dict(run)


def module_ends(events: list[dict[str, Any]], module: str) -> list[dict[str, Any]]:
    """The results of the tasks of one module (their names are templated in the events)."""
    return [e for e in events if e["event"] == "task_end" and e["module"] == module]


def process(pid: int) -> tuple[list[str], dict[str, str], str]:
    """(argv, environment, working directory) of a process, from this machine's /proc."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    env = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in e)
    return argv, env, os.readlink(f"/proc/{pid}/cwd")


def launch_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in SESSION_KEYS}


@pytest.mark.parametrize("bad", sorted(BAD_RELEASES))
def test_a_failed_release_puts_the_last_good_run_back(target: Target, cleanup_marker: str, bad: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        rc, out, _ = job.play("restart_training.yml")
        assert rc == 0, out
        good = job.good()
        good_release = good["release"]
        assert good["release_dir"] == f"{job.demo}/code/releases/{good_release}"
        assert oct((job.demo / "train.good.json").stat().st_mode & 0o777) == "0o600"
        assert oct((job.demo / "train.launch.json").stat().st_mode & 0o777) == "0o600"
        first_pid = target.host_pid(job.demo / "train.pid")
        _, first_env, _ = process(first_pid)

        job.write_src(bad, BAD_RELEASES[bad])
        started = time.monotonic()
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / bad))
        took = time.monotonic() - started
        assert rc == 2, out
        failed_release = module_ends(events, "deploy_code")[0]["data"]["release"]
        assert failed_release != good_release
        (fail,) = task_ends(events, FAIL)
        line = LINE.match(fail["msg"])
        assert line, fail["msg"]
        assert line["release"] == good_release
        assert line["task"] in (f"Launch the new run detached (log {job.demo}/train.log)",
                                "Verify the run is up (processes, log growing, no errors)")
        expected_why = {"fails_to_start": "code 1", "crashes": "code 1", "hangs": "hung: "}[bad]
        assert expected_why in line["why"], line["why"]
        (rolled,) = task_ends(events, ROLL_BACK)
        assert rolled["status"] == "changed" and rolled["data"]["verified"] is True
        print(f"\n[{bad}] restart with rollback {took:.1f}s; rollback task {rolled['data']['took_s']}s")

        # One job: the previous release, started exactly as its verified launch.
        pid = target.host_pid(job.demo / "train.pid")
        assert wait_for(lambda: job.running() == [pid], 5), (job.running(), pid)
        assert int(line["pid"]) == int((job.demo / "train.pid").read_text())
        argv, env, cwd = process(pid)
        again = job.good()
        assert again["release"] == good_release and again["pid"] == int(line["pid"])
        assert argv == good["argv"] == again["argv"]
        assert cwd == good["chdir"] == f"{job.demo}/code/releases/{good_release}"
        assert all(env.get(k) == v for k, v in good["env"].items()), good["env"]
        assert launch_env(env) == launch_env(first_env)
        assert os.readlink(job.demo / "code" / "current") == f"releases/{good_release}"
        assert (job.demo / "code" / "releases" / failed_release).is_dir()  # kept: it is not pruned yet
        # Unchanged files of the failed release are hard links to the good one.
        assert os.path.samefile(job.demo / "code" / "releases" / good_release / "config.txt",
                                job.demo / "code" / "releases" / failed_release / "config.txt")

        run = job.last_run()
        assert run["exit_code"] == 2
        rows = {t["task"]: t for t in run["tasks"]}
        assert rows[line["task"]]["status"] in ("failed", "timed_out")
        assert rows[ROLL_BACK]["status"] == "changed"
        assert "rolled back to release " + good_release in rows[ROLL_BACK]["msg"]
        assert rows[FAIL]["msg"] == fail["msg"]
        assert run["recap"]["target"]["rescued"] == 1 and run["recap"]["target"]["failed"] == 1
        assert job.vars["train_env"]["API_TOKEN"] not in out + json.dumps(run) + json.dumps(events)

        status_rc, status_out, status_events = job.play("status.yml")
        assert status_rc == 0, status_out
        assert f"release {good_release}" in status_out
        (check,) = task_ends(status_events)
        assert check["data"]["release"] == good_release
    finally:
        kill_marked(cleanup_marker)


def test_no_last_good_run_means_no_rollback_and_says_so(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        job.write_src("crash", BAD_RELEASES["crashes"])
        rc, out, events = job.play("restart_training.yml", code_src=str(job.src / "crash"))
        assert rc == 2, out
        (fail,) = task_ends(events, FAIL)
        assert re.match(r"(Launch the new run detached|Verify the run is up) .* failed: .*code 1", fail["msg"])
        assert "; no rollback: no last good run is recorded for this job (" in fail["msg"], fail["msg"]
        assert wait_for(lambda: job.running() == [], 5)
    finally:
        kill_marked(cleanup_marker)


def test_a_failed_deploy_leaves_the_good_run_alone(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        rc, out, _ = job.play("restart_training.yml")
        assert rc == 0, out
        pid = target.host_pid(job.demo / "train.pid")
        # A deploy the target refuses (its dest lies under a file). A src that does not exist is
        # bad input now, refused before any host is touched (tests/e2e/test_missing_sources.py).
        (job.demo / "afile").write_text("a file, not a folder\n")
        rc, out, events = job.play("restart_training.yml", code_dest=str(job.demo / "afile" / "code"))
        assert rc == 2, out
        (deploy,) = task_ends(events, "Deploy training code to " + str(job.demo / "afile" / "code"))
        assert deploy["status"] == "failed", deploy
        (fail,) = task_ends(events, FAIL)
        assert "no rollback needed: the last good run (release " in fail["msg"], fail["msg"]
        assert job.running() == [pid]
    finally:
        kill_marked(cleanup_marker)


def test_rollback_playbook_by_hand_check_mode_and_named_release(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        first = job.good()["release"]
        job.write_src("v2", ('p.add_argument("--save-every", type=int, default=10)',
                             'p.add_argument("--save-every", type=int, default=11)'))
        time.sleep(1.1)  # another second: another release name
        rc, out, _ = job.play("restart_training.yml", code_src=str(job.src / "v2"))
        assert rc == 0, out
        second = job.good()["release"]
        assert second != first
        pid = target.host_pid(job.demo / "train.pid")

        rc, out, events = job.play("rollback.yml", "--check")
        assert rc == 0, out
        (dry,) = module_ends(events, "rollback")
        assert dry["msg"].startswith(f"would roll back to release {first} (no git commit): stop ")
        assert f"switch current from {second} to it" in dry["msg"]
        assert job.running() == [pid] and os.readlink(job.demo / "code" / "current") == f"releases/{second}"

        rc, out, events = job.play("rollback.yml")
        assert rc == 0, out
        (done,) = module_ends(events, "rollback")
        assert done["msg"].startswith(f"rolled back to release {first} (no git commit), pid ")
        new_pid = target.host_pid(job.demo / "train.pid")
        assert wait_for(lambda: job.running() == [new_pid], 5) and new_pid != pid
        _, _, cwd = process(new_pid)
        assert cwd == f"{job.demo}/code/releases/{first}"
        assert job.good()["release"] == first

        rc, out, events = job.play("rollback.yml", "-e", f"release={second}")
        assert rc == 0, out
        assert job.good()["release"] == second
        assert os.readlink(job.demo / "code" / "current") == f"releases/{second}"
        rc, out, events = job.play("rollback.yml", "-e", "release=nope")
        assert rc == 2
        assert "rollback failed: no release 'nope' in " in module_ends(events, "rollback")[0]["msg"]
        assert len(job.running()) == 1
    finally:
        kill_marked(cleanup_marker)


def test_releases_are_pruned_but_never_the_running_or_last_good_one(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    job.vars["keep_releases"] = 2
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()["release"]
        for n in range(3):  # three more releases, each failing verify: the good one keeps running
            job.write_src(f"crash{n}", ('p.add_argument("--crash-after", type=int, default=0)',
                                        f'p.add_argument("--crash-after", type=int, default={3 + n})'))
            time.sleep(1.1)
            rc, out, _ = job.play("restart_training.yml", code_src=str(job.src / f"crash{n}"))
            assert rc == 2, out
        names = sorted(p.name for p in (job.demo / "code" / "releases").iterdir() if p.is_dir())
        assert good in names and len(names) == 3, names  # the 2 newest, and the good one past them
        assert job.good()["release"] == good and len(job.running()) == 1
    finally:
        kill_marked(cleanup_marker)


def test_identical_content_makes_no_new_release(target: Target, cleanup_marker: str) -> None:
    job = Job(target, cleanup_marker)
    try:
        assert job.play("restart_training.yml")[0] == 0
        release = job.good()["release"]
        rc, out, events = job.play("restart_training.yml")
        assert rc == 0, out
        (deploy,) = module_ends(events, "deploy_code")
        assert deploy["status"] == "ok" and deploy["msg"] == f"2 files up to date in release {release} " \
            f"({job.demo}/code/current)"
        assert [p.name for p in (job.demo / "code" / "releases").iterdir() if p.is_dir()] == [release]
    finally:
        kill_marked(cleanup_marker)


def test_plain_deploys_roll_back_to_the_last_good_launch(target: Target, cleanup_marker: str) -> None:
    """Without releases (the default) the code stays as deployed; the last good run's launch
    (here: without the extra argument that made the new run crash) is started again."""
    job = Job(target, cleanup_marker)
    job.vars.update(releases=False, train_command=f"{target.python} -u {job.demo}/code/train.py --run-name "
                    f"{cleanup_marker} --step-time 0.05 --checkpoint {job.demo}/ck.json", train_chdir=str(job.demo))
    try:
        assert job.play("restart_training.yml")[0] == 0
        good = job.good()
        assert good["release"] is None and not (job.demo / "code" / "current").exists()
        rc, out, events = job.play("restart_training.yml", "-e", "train_extra_args=--crash-after=3")
        assert rc == 2, out
        (fail,) = task_ends(events, FAIL)
        assert fail["msg"].endswith("; rolled back to the last good run's launch (no release: the code deployed "
                                    f"in place stays), pid {(job.demo / 'train.pid').read_text().strip()}, verified")
        pid = target.host_pid(job.demo / "train.pid")
        assert wait_for(lambda: job.running() == [pid], 5)
        argv, _, cwd = process(pid)
        assert argv == good["argv"] and "--crash-after=3" not in argv and cwd == str(job.demo)
    finally:
        kill_marked(cleanup_marker)
