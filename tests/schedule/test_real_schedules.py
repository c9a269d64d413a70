"""Schedules installed for real, in the test container (tests/lxc.py), which runs systemd and
cron: `opsrunner schedule add` there writes and enables real units with systemctl, or the
real crontab with `crontab -`; the run that systemd or cron starts is recorded in the history
under the schedule's name; `schedule remove` uninstalls it. (tests/schedule/test_schedule_cli.py
covers the same commands with the unit directory and crontab file doubles.)

opsrunner runs inside the container from a venv in the shared directory (tests/lxc_opsrunner.py;
the container itself never reaches the network here). Each test uses its own schedule name,
folder and HOME, and removes what it installed (units, drop-in, crontab, user) in a finally.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import lxc as lxc_rig
from tests import lxc_opsrunner
from tests.conftest import ROOT, wait_for, write_yaml

pytestmark = pytest.mark.lxc

SYSTEM_UNITS = "/etc/systemd/system"
#: systemd's record of when a Persistent= timer last fired
STAMPS = "/var/lib/systemd/timers"


@dataclass(frozen=True)
class Inside:
    """opsrunner installed in the container, and this module's folder in the shared directory."""

    ct: lxc_rig.Container
    folder: Path
    venv: Path

    def run(self, argv: list[str], *, user: str | None = None, home: Path | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return lxc_opsrunner.attach(self.ct, argv, user=user, home=str(home) if home else None, cwd=cwd,
                                    timeout=timeout)

    def opsrunner(self, *args: str, home: Path, cwd: Path | None = None,
                  user: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.run([str(self.venv / "bin" / "opsrunner"), *args], user=user, home=home, cwd=cwd)

    def root(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run(["sh", "-c", script], timeout=timeout)

    def history(self, home: Path, schedule: str, user: str | None = None) -> list[dict[str, Any]]:
        res = self.opsrunner("history", "--json", "-n", "50", home=home, user=user)
        assert res.returncode == 0, res.stdout + res.stderr
        return [r for r in json.loads(res.stdout) if r["schedule"] == schedule]


@pytest.fixture(scope="module")
def inside(lxc: lxc_rig.Container) -> Iterator[Inside]:
    folder = Path(tempfile.mkdtemp(prefix="schedules-", dir=lxc.share))
    folder.chmod(0o755)  # the cron test's user reads the venv and its project in here
    try:
        try:
            venv = lxc_opsrunner.install(lxc, ROOT, folder)
        except lxc_rig.LxcUnavailable as exc:
            if lxc_rig.MODE == "require":
                pytest.fail(f"opsrunner cannot be installed in the container (OPSRUNNER_TEST_LXC=require): {exc}")
            pytest.skip(f"opsrunner cannot be installed in the container: {exc}")
        yield Inside(lxc, folder, venv)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def project(base: Path, name: str) -> Path:
    """A playbook for the container itself (local connection) that leaves a line in ran.txt."""
    proj = base / "project"
    write_yaml(proj / "site.yml", [{"name": "Scheduled", "hosts": "all", "tasks": [
        {"name": "Procedure", "debug": {"msg": f"scheduled procedure of {name}"}},
        {"name": "Leave a mark", "shell": f"echo ran >> {proj}/ran.txt"},
    ]}])
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"ct": {"connection": "local"}}}})
    return proj


def unique() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def test_systemd_timer_is_installed_runs_and_is_removed(inside: Inside) -> None:
    name = unique()
    unit = f"opsrunner-{name}"
    base = inside.folder / name
    home, schedules = base / "home", base / "schedules"
    home.mkdir(parents=True)
    proj = project(base, name)
    try:
        add = inside.opsrunner("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "Sun 03:00",
                               "--randomized-delay", "0", "--schedules", str(schedules), home=home, cwd=proj)
        assert add.returncode == 0, add.stdout + add.stderr
        match = re.match(rf"schedule {name}: site\.yml at 'Sun 03:00', next run (\S+ \S+)\n", add.stdout)
        assert match, add.stdout
        assert f"  wrote {SYSTEM_UNITS}/{unit}.service\n  wrote {SYSTEM_UNITS}/{unit}.timer\n" in add.stdout

        # installed and enabled for real: systemd knows the timer and when it fires next
        state = inside.root(f"systemctl is-enabled {unit}.timer; systemctl is-active {unit}.timer")
        assert state.stdout.split() == ["enabled", "active"], state.stdout + state.stderr
        timers = inside.root(f"systemctl list-timers --all --no-pager {unit}.timer")
        assert timers.returncode == 0, timers.stderr
        (line,) = [ln for ln in timers.stdout.splitlines() if f"{unit}.timer" in ln]
        assert match.group(1) in line and f"{unit}.service" in line, timers.stdout  # opsrunner's next run = systemd's
        service = inside.root(f"systemctl show -p User -p WorkingDirectory -p LoadState {unit}.service")
        assert sorted(service.stdout.split()) == ["LoadState=loaded", "User=root", f"WorkingDirectory={proj}"]

        # what the timer starts: the run's history and state go to this test's HOME (a drop-in;
        # the unit as installed would use root's), everything else is the unit as written
        inside.root(f"mkdir -p {SYSTEM_UNITS}/{unit}.service.d && printf '[Service]\\nEnvironment=HOME={home}\\n'"
                    f" > {SYSTEM_UNITS}/{unit}.service.d/test-home.conf && systemctl daemon-reload")
        start = inside.root(f"systemctl start {unit}.service", timeout=300)
        assert start.returncode == 0, start.stderr + inside.root(f"journalctl -u {unit}.service --no-pager").stdout
        result = inside.root(f"systemctl show -p Result -p ExecMainStatus {unit}.service")
        assert sorted(result.stdout.split()) == ["ExecMainStatus=0", "Result=success"], result.stdout
        assert (proj / "ran.txt").read_text() == "ran\n"
        (run,) = inside.history(home, name)
        assert run["exit_code"] == 0 and run["result"] == "ok", run
        assert run["playbook"] == str(proj / "site.yml") and run["user"] == "root"
        assert run["command"].endswith("--lock") and [t["task"] for t in run["tasks"]] == ["Procedure", "Leave a mark"]
        listed = inside.opsrunner("schedule", "list", "--schedules", str(schedules), home=home)
        row = rf"^{name}\s+Sun 03:00\s.*\sok \({run['id']}\)\s+site\.yml$"
        assert re.search(row, listed.stdout, re.M), listed.stdout

        inside.root(f"rm -r {SYSTEM_UNITS}/{unit}.service.d")
        remove = inside.opsrunner("schedule", "remove", name, "--schedules", str(schedules), home=home)
        assert remove.returncode == 0, remove.stdout + remove.stderr
        assert remove.stdout == (f"  removed {SYSTEM_UNITS}/{unit}.timer\n  removed {SYSTEM_UNITS}/{unit}.service\n"
                                 f"  removed {STAMPS}/stamp-{unit}.timer\n"
                                 f"  removed {schedules}/{name}.yml\nschedule {name} removed\n")
        gone = inside.root(f"systemctl show -p LoadState {unit}.timer {unit}.service;"
                           f" ls {SYSTEM_UNITS} {SYSTEM_UNITS}/timers.target.wants {STAMPS}")
        assert gone.stdout.count("LoadState=not-found") == 2 and unit not in gone.stdout, gone.stdout
        assert unit not in inside.root("systemctl list-timers --all --no-pager").stdout
    finally:
        uninstall(inside, unit)
        shutil.rmtree(base, ignore_errors=True)


def uninstall(inside: Inside, unit: str) -> None:
    """Whatever of the units a test left installed, gone (never fails)."""
    inside.root(f"systemctl disable --now {unit}.timer; systemctl stop {unit}.service;"
                f" rm -rf {SYSTEM_UNITS}/{unit}.timer {SYSTEM_UNITS}/{unit}.service {SYSTEM_UNITS}/{unit}.service.d"
                f" {SYSTEM_UNITS}/timers.target.wants/{unit}.timer {STAMPS}/stamp-{unit}.timer;"
                f" systemctl daemon-reload; systemctl reset-failed {unit}.timer {unit}.service; true")


def test_a_schedule_removed_and_added_again_does_not_run_at_once(inside: Inside) -> None:
    """Its timer is Persistent=: systemd runs at once what it missed since the stamp it keeps.
    remove deletes that stamp, so a schedule added again under the same name starts afresh
    instead of catching up on the days it was gone (here: 2 days of `daily`)."""
    name = unique()
    unit = f"opsrunner-{name}"
    base = inside.folder / name
    home, schedules = base / "home", base / "schedules"
    home.mkdir(parents=True)
    proj = project(base, name)
    add = ["schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "daily", "--randomized-delay", "0",
           "--schedules", str(schedules)]
    try:
        first = inside.opsrunner(*add, home=home, cwd=proj)
        assert first.returncode == 0, first.stdout + first.stderr
        aged = inside.root(f"touch -d '2 days ago' {STAMPS}/stamp-{unit}.timer")  # as if added 2 days ago
        assert aged.returncode == 0, aged.stderr
        remove = inside.opsrunner("schedule", "remove", name, "--schedules", str(schedules), home=home)
        assert remove.returncode == 0 and f"  removed {STAMPS}/stamp-{unit}.timer\n" in remove.stdout, remove.stdout
        # any run goes to this test's HOME and folder
        inside.root(f"mkdir -p {SYSTEM_UNITS}/{unit}.service.d && printf '[Service]\\nEnvironment=HOME={home}\\n'"
                    f" > {SYSTEM_UNITS}/{unit}.service.d/test-home.conf")
        again = inside.opsrunner(*add, home=home, cwd=proj)
        assert again.returncode == 0, again.stdout + again.stderr
        time.sleep(3)  # a catch-up run starts within a second of `enable --now`
        shown = inside.root(f"systemctl show -p LastTriggerUSec -p NextElapseUSecRealtime {unit}.timer;"
                            f" systemctl show -p ExecMainStartTimestampMonotonic {unit}.service")
        props = dict(line.partition("=")[::2] for line in shown.stdout.splitlines())
        next_run = re.search(r"next run (\S+ \S+)\n", again.stdout)
        assert next_run and next_run.group(1) in props["NextElapseUSecRealtime"], (again.stdout, props)
        assert props["LastTriggerUSec"] in ("", "n/a") and props["ExecMainStartTimestampMonotonic"] == "0", props
        assert not (proj / "ran.txt").exists()
    finally:
        uninstall(inside, unit)
        shutil.rmtree(base, ignore_errors=True)


def test_cron_entry_is_installed_fired_by_cron_and_removed(inside: Inside) -> None:
    """As a user of the container: `crontab -` writes their crontab, the cron daemon runs the
    every-minute schedule (within about 60 s), and remove takes the line out again."""
    name = unique()
    user = f"opsr{uuid.uuid4().hex[:8]}"
    base = inside.folder / name
    home, schedules = base / "home", base / "schedules"
    home.mkdir(parents=True)
    proj = project(base, name)
    try:
        made = inside.root(f"useradd --no-create-home --home-dir {home} --shell /bin/sh {user}"
                           f" && chown -R {user}: {base}")
        assert made.returncode == 0, made.stderr
        add = inside.opsrunner("schedule", "add", name, "site.yml", "-i", "inv.yml", "--every", "1m", "--cron",
                               "--schedules", str(schedules), home=home, cwd=proj, user=user)
        assert add.returncode == 0, add.stdout + add.stderr
        assert add.stdout.startswith(f"schedule {name}: site.yml at '*-*-* *:*:00', next run ")
        assert "  wrote the user's crontab\n" in add.stdout
        crontab = inside.run(["crontab", "-l"], user=user, home=home)
        (line,) = crontab.stdout.splitlines()
        assert line == (f"* * * * * cd {proj} && {inside.venv}/bin/python -P -m opsrunner schedule run {name}"
                        f" --schedules {schedules} # opsrunner-schedule:{name}"), crontab.stdout

        # cron reads the new crontab and starts the run at the next full minute (at most 60 s;
        # the rest is for the run itself on a busy machine)
        assert wait_for(lambda: (proj / "ran.txt").exists(), 100, 0.5), \
            inside.root("journalctl -u cron --no-pager -n 20").stdout
        assert wait_for(lambda: any(r["exit_code"] is not None for r in inside.history(home, name, user)), 60, 1)
        run = inside.history(home, name, user)[-1]  # the first run (the list is newest first)
        assert run["exit_code"] == 0 and run["result"] == "ok" and run["user"] == user, run
        assert run["cwd"] == str(proj) and run["command"].endswith("--lock")

        remove = inside.opsrunner("schedule", "remove", name, "--schedules", str(schedules), home=home, user=user)
        assert remove.returncode == 0, remove.stdout + remove.stderr
        assert remove.stdout.startswith(f"  removed the crontab entry of {name}\n")
        after = inside.run(["crontab", "-l"], user=user, home=home)
        assert f"opsrunner-schedule:{name}" not in after.stdout and not (schedules / f"{name}.yml").exists()
    finally:
        inside.root(f"crontab -r -u {user}")
        # a run cron started meanwhile may still be going: wait for it, then stop what is left by pid
        uid = inside.run(["id", "-u", user]).stdout.strip()
        if uid.isdigit() and not wait_for(lambda: not user_pids(inside.ct, int(uid)), 60, 0.5):
            for pid in user_pids(inside.ct, int(uid)):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not user_pids(inside.ct, int(uid)), 10)
        inside.root(f"userdel {user}")
        shutil.rmtree(base, ignore_errors=True)


def user_pids(ct: lxc_rig.Container, uid: int) -> list[int]:
    """This machine's pids of the container's processes running as uid (a privileged container:
    the same uid on both sides)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
        if str(uid) in uids and ct.target_pid(int(name)) is not None:
            found.append(int(name))
    return found


def installed(inside: Inside, name: str, tasks: list[dict[str, Any]]) -> tuple[Path, Path, Path]:
    """A schedule of `tasks` on the container itself (local connection), added for real, its
    runs going to its own HOME (a drop-in); (project, home, schedules folder)."""
    unit = f"opsrunner-{name}"
    base = inside.folder / name
    home, schedules, proj = base / "home", base / "schedules", base / "project"
    home.mkdir(parents=True)
    write_yaml(proj / "site.yml", [{"name": "Scheduled", "hosts": "all", "tasks": tasks}])
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"ct": {"connection": "local"}}}})
    add = inside.opsrunner("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "Sun 03:00",
                           "--schedules", str(schedules), home=home, cwd=proj)
    assert add.returncode == 0, add.stdout + add.stderr
    inside.root(f"mkdir -p {SYSTEM_UNITS}/{unit}.service.d && printf '[Service]\\nEnvironment=HOME={home}\\n'"
                f" > {SYSTEM_UNITS}/{unit}.service.d/test-home.conf && systemctl daemon-reload")
    return proj, home, schedules


def pids_running(ct: lxc_rig.Container, words: str) -> list[int]:
    """This machine's pids of the container's processes whose command line is `words`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip() == words.encode() \
                    and ct.target_pid(int(pid)) is not None:
                found.append(int(pid))
    return found


def test_a_job_launched_by_the_timer_outlives_its_service(inside: Inside) -> None:
    """The service ends when its run ends; a job the run launched on a `connection: local`
    host is meant to go on running (as after `opsrunner play`), not to be killed with it."""
    name = unique()
    unit = f"opsrunner-{name}"
    job = f"sleep 86{uuid.uuid4().int % 10**6:06d}"
    pidfile = inside.folder / name / "job.pid"
    try:
        installed(inside, name, [{"name": "Launch", "launch_detached": {
            "command": job, "pidfile": str(pidfile), "log": str(pidfile.with_suffix(".log"))}}])
        start = inside.root(f"systemctl start {unit}.service", timeout=300)
        assert start.returncode == 0, start.stderr + inside.root(f"journalctl -u {unit}.service --no-pager").stdout
        assert wait_for(lambda: inside.root(f"systemctl is-active {unit}.service").stdout.strip() == "inactive", 30)
        time.sleep(2)  # what systemd kills at the unit's end is killed by now
        alive = pids_running(inside.ct, job)
        assert len(alive) == 1, inside.root(f"journalctl -u {unit}.service --no-pager -n 20").stdout
        assert inside.ct.target_pid(alive[0]) == int(pidfile.read_text())  # the job its pidfile names
    finally:
        uninstall(inside, unit)
        for pid in pids_running(inside.ct, job):
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not pids_running(inside.ct, job), 10)
        shutil.rmtree(inside.folder / name, ignore_errors=True)


def test_stopping_the_service_stops_its_run_and_the_run_s_commands(inside: Inside) -> None:
    """`systemctl stop` of a service whose run is going on: the run is stopped (SIGTERM), recorded
    so, and the command its task was running is stopped with it (opsrunner stops it itself)."""
    name = unique()
    unit = f"opsrunner-{name}"
    task = f"sleep 87{uuid.uuid4().int % 10**6:06d}"
    try:
        _, home, _ = installed(inside, name, [{"name": "Long", "command": task}])
        assert inside.root(f"systemctl start --no-block {unit}.service").returncode == 0
        assert wait_for(lambda: pids_running(inside.ct, task), 60, 0.2)
        stop = inside.root(f"systemctl stop {unit}.service", timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert wait_for(lambda: not pids_running(inside.ct, task), 10)
        (run,) = inside.history(home, name)
        assert (run["result"], run["exit_code"], run["tasks"][0]["status"]) == ("terminated", 143, "interrupted"), run
    finally:
        uninstall(inside, unit)
        for pid in pids_running(inside.ct, task):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(inside.folder / name, ignore_errors=True)
