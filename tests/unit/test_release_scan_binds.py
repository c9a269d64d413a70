"""A process in a mount namespace that bind-mounts a release's subfolder elsewhere (what an
LXC container's `lxc.mount.entry = /srv/code/releases/R/src code none bind` or Proxmox's
`pct set -mp0 /srv/code/releases/R/src,mp=/code` makes) uses that release through every path
under the mount point: walking up from there never reaches the release, its mount table
tells. Made here with `unshare --mount` and `mount --bind` (the kernel mechanism a container
uses); tests/modules/test_release_binds.py does it in the real container."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from opsrunner.remote.inuse import release_users
from tests.conftest import ROOT, kill_marked, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare(1)")

#: Maps the file whose path sys.argv[1] holds (its command line names no path of the mount).
MAP = ("import mmap, sys, time; f = open(open(sys.argv[1]).read(), 'rb'); "
       "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close(); time.sleep(60)")


def _layout(base: Path) -> tuple[Path, Path, Path]:
    """releases/R/src/data, an unrelated folder, and an empty mount point: (src, other, point)."""
    src, other, point = base / "releases" / "R" / "src", base / "other", base / "mnt" / "code"
    for folder in (src, other, point):
        folder.mkdir(parents=True)
    (src / "data").write_text("x")
    (other / "data").write_text("x")
    (base / "where").write_text(f"{point}/data")
    return src, other, point


@contextmanager
def _in_namespace(script: str, marker: str) -> Iterator[int]:
    """`sh -c script` in a mount namespace of its own (unshare execs it: the same pid), once it
    has mounted and exec'd the command carrying `marker`."""
    if subprocess.run(["unshare", "--mount", "true"]).returncode:
        pytest.skip("no mount namespaces here")
    proc = subprocess.Popen(["unshare", "--mount", "sh", "-c", script], cwd="/", start_new_session=True)
    try:
        def started() -> bool:  # the script's own command line names the mount point too
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            return marker.encode() in cmdline and script.encode() not in cmdline

        assert wait_for(started, 5)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        kill_marked(marker)


@pytest.mark.parametrize("how, why", [
    ("cd {p} && exec sleep {m}", "its working directory"),
    ("exec 3<{p}/data && exec sleep {m}", "a file it has open"),
    ("exec {py} -c \"{map}\" {t}/where {m}", "a file it has mapped"),
    ("exec sh -c 'sleep {m}; : {p}/job.py'", "its command line"),
    ("export PYTHONPATH=/opt/lib:{p}/lib && exec sleep {m}", "its environment: PYTHONPATH"),
], ids=["cwd", "open", "mapped", "cmdline", "environ"])
def test_a_release_subfolder_bind_mounted_elsewhere_is_in_use(tmp_path: Path, cleanup_marker: str, how: str,
                                                              why: str) -> None:
    src, _, point = _layout(tmp_path)
    command = how.format(p=point, m=cleanup_marker, py=sys.executable, map=MAP, t=tmp_path)
    with _in_namespace(f"mount --bind {src} {point} && {command}", cleanup_marker) as pid:
        assert wait_for(lambda: f"{point}/data".encode() in Path(f"/proc/{pid}/maps").read_bytes(), 5) \
            if why == "a file it has mapped" else True
        scan = release_users(str(tmp_path / "releases"), ["R"])
        assert scan.kept("R") == f"pid {pid} ({why}) uses it"
        assert scan.limits() == ""


def test_a_bind_mount_of_an_unrelated_folder_is_no_use(tmp_path: Path, cleanup_marker: str) -> None:
    _, other, point = _layout(tmp_path)
    script = f"mount --bind {other} {point} && cd {point} && exec 3<{point}/data && exec sleep {cleanup_marker}"
    with _in_namespace(script, cleanup_marker):
        scan = release_users(str(tmp_path / "releases"), ["R"])
        assert scan.kept("R") is None and scan.users == {}


def test_a_mount_namespace_without_binds_is_judged_as_before(tmp_path: Path, cleanup_marker: str) -> None:
    src, _, _ = _layout(tmp_path)
    with _in_namespace(f"cd {src} && exec sleep {cleanup_marker}", cleanup_marker) as pid:
        scan = release_users(str(tmp_path / "releases"), ["R"])
        assert scan.kept("R") == f"pid {pid} (its working directory) uses it"


def test_a_bind_mount_in_the_agents_own_namespace_is_seen_too(tmp_path: Path, cleanup_marker: str) -> None:
    """The job and the agent in one namespace (a host that bind-mounts a release's subfolder
    at /code): the agent's own mount table tells."""
    src, _, point = _layout(tmp_path)
    scan = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from opsrunner.remote.inuse import release_users; "
            f"print(release_users({str(tmp_path / 'releases')!r}, ['R']).kept('R'))")
    script = tmp_path / "job.sh"  # the shell's command line names no path under the mount point
    script.write_text(f"mount --bind {src} {point} || exit 1\n(cd {point} && exec sleep {cleanup_marker}) &\n"
                      f"echo $!\nsleep 0.3\n{sys.executable} -c \"{scan}\"\nkill $!\n")
    out = subprocess.run(["unshare", "--mount", "sh", str(script)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    pid, kept = out.stdout.splitlines()
    assert kept == f"pid {pid} (its working directory) uses it"
