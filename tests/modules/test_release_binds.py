"""A job that runs from a bind mount of a release's subfolder (the code deployed on the host,
`lxc.mount.entry = /srv/code/releases/R/app code none bind` or `pct set -mp0
/srv/code/releases/R/app,mp=/code` into a container) uses that release: deploy_code's prune
keeps it, and a plain deploy keeps `current` while it names it, saying which process. Made
with `unshare --mount` + `mount --bind`, and in the real LXC container."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import lxc as lxc_rig
from tests.conftest import kill_marked, pids_with, wait_for
from tests.lxc_opsrunner import attach
from tests.modules.conftest import Target, _target_for


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


def _deploy(target: Target, dest: Path, version: str, **more: object) -> dict[str, object]:
    """A release deploy of code whose app/ folder a job runs from: its task end."""
    src = Path(tempfile.mkdtemp(dir=target.work)) / "code"
    (src / "app").mkdir(parents=True)
    (src / "app" / "run.py").write_text(f"VERSION = {version!r}\n")
    run = target.play([{"deploy_code": {"src": f"{src}/", "dest": str(dest), **more}}])
    assert run.rc == 0, run.out
    return run.end("deploy_code")


def _needs_unshare() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1)")
    if subprocess.run(["unshare", "--mount", "true"]).returncode:
        pytest.skip("no mount namespaces here")


@contextmanager
def _job_in_namespace(app: Path, point: Path, marker: str) -> Iterator[int]:
    """A job in a mount namespace of its own that bind-mounts `app` at `point` and runs from
    there (its working directory); its pid. The script is a file: no command line names `app`."""
    script = point.parent / f"job-{marker}.sh"
    script.write_text(f"mount --bind {app} {point} || exit 1\ncd {point} && exec sleep {marker}\n")
    proc = subprocess.Popen(["unshare", "--mount", "sh", str(script)], cwd="/", start_new_session=True)
    try:
        assert wait_for(lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep"), 5)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_the_prune_keeps_a_release_a_job_runs_from_through_a_bind_mount(target: Target, cleanup_marker: str) -> None:
    _needs_unshare()
    dest, point = target.work / "code", target.work / "mnt" / "code"
    point.mkdir(parents=True)
    first = str(_deploy(target, dest, "1", releases=True)["data"]["release"])  # type: ignore[index]
    with _job_in_namespace(dest / "releases" / first / "app", point, cleanup_marker) as pid:
        end = _deploy(target, dest, "2", releases=True, keep_releases=1)
        why = f"in use by pid {pid} (its working directory)"
        assert end["data"]["spared"] == {first: why} and end["data"]["pruned"] == [], end  # type: ignore[index]
        assert str(end["msg"]).endswith(f"; kept past keep_releases: {first} ({why})"), end["msg"]
    end = _deploy(target, dest, "3", releases=True, keep_releases=1)  # the job has ended
    assert first in end["data"]["pruned"], end  # type: ignore[index]
    assert not (dest / "releases" / first).exists()


def test_a_plain_deploy_keeps_current_a_job_runs_from_through_a_bind_mount(target: Target,
                                                                           cleanup_marker: str) -> None:
    _needs_unshare()
    dest, point = target.work / "code", target.work / "mnt" / "code"
    point.mkdir(parents=True)
    release = str(_deploy(target, dest, "1", releases=True)["data"]["release"])  # type: ignore[index]
    with _job_in_namespace(dest / "releases" / release / "app", point, cleanup_marker) as pid:
        msg = str(_deploy(target, dest, "plain")["msg"])
        assert msg.endswith(f"; current ({dest}/current -> release {release}) kept: pid {pid} (its working "
                            "directory) uses it"), msg
        assert os.readlink(dest / "current") == f"releases/{release}"


def _container_pids(ct: lxc_rig.Container, marker: str) -> list[int]:
    """This machine's pids of the container's processes carrying `marker`."""
    return [p for p in pids_with(marker) if ct.target_pid(p) is not None]


@pytest.mark.lxc
def test_the_prune_keeps_releases_bind_mounted_into_the_container(lxc: lxc_rig.Container, target: Target,
                                                                  cleanup_marker: str) -> None:
    """The code deployed on this machine, two releases' app/ bind-mounted into the container's
    own mount namespace (as lxc.mount.entry does); a job there runs from one (its working
    directory), another has a file of the other open: this machine's prune keeps both, naming
    each job's pid as this machine sees it."""
    base = Path(tempfile.mkdtemp(prefix="binds-", dir=lxc.share))
    dest, points = base / "code", [f"/mnt/{cleanup_marker}-{n}" for n in (1, 2)]
    jobs = []
    try:
        releases = [str(_deploy(target, dest, str(n), releases=True)["data"]["release"])  # type: ignore[index]
                    for n in (1, 2)]
        mounts = " && ".join(f"mkdir -p {point} && mount --bind {dest}/releases/{release}/app {point}"
                             for point, release in zip(points, releases, strict=True))
        mounted = attach(lxc, ["sh", "-c", mounts])
        assert mounted.returncode == 0, mounted.stderr
        for script in (f"cd / && exec 3<{points[0]}/run.py && exec sleep {cleanup_marker}",
                       f"cd {points[1]} && exec sleep {cleanup_marker}"):
            jobs.append(subprocess.Popen(["lxc-attach", "-n", lxc.name, "--clear-env", "--", "sh", "-c", script],
                                         stdin=subprocess.DEVNULL, start_new_session=True))
            assert wait_for(lambda: len(_container_pids(lxc, cleanup_marker)) == len(jobs)
                            and all(Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep")
                                    for p in _container_pids(lxc, cleanup_marker)), 10)
        # the job's paths as the container sees them: none names the release
        (opener,) = [p for p in _container_pids(lxc, cleanup_marker) if os.readlink(f"/proc/{p}/cwd") == "/"]
        (runner,) = [p for p in _container_pids(lxc, cleanup_marker) if os.readlink(f"/proc/{p}/cwd") == points[1]]
        assert os.readlink(f"/proc/{opener}/fd/3") == f"{points[0]}/run.py"
        data = _deploy(target, dest, "3", releases=True, keep_releases=1)["data"]
        assert data == {**data, "pruned": [], "spared": {  # type: ignore[dict-item]
            releases[0]: f"in use by pid {opener} (a file it has open)",
            releases[1]: f"in use by pid {runner} (its working directory)"}}, data
        assert all((dest / "releases" / r / "app" / "run.py").is_file() for r in releases)
    finally:
        kill_marked(cleanup_marker)  # the unique marker: the container's jobs and their lxc-attach
        for job in jobs:
            job.wait(timeout=10)
        attach(lxc, ["sh", "-c", "; ".join(f"umount {p}; rmdir {p}" for p in points)])
        shutil.rmtree(base)
