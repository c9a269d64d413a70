"""opsrunner installed inside the test container (tests/lxc.py), for tests that run it there:
real systemd timers and cron need the controller itself in the container.

The container's python3 (Debian's) has none of opsrunner's dependencies and the container
never reaches the network in a test. So this machine downloads the dependencies' wheels for
the container's Python and platform (`pip download --only-binary`, from the package
registry pip is set up with here) into the container's shared directory, and the container
installs them from there (`pip install --no-index`) into a venv there: once per machine and
set of dependencies (the folder is named after their hash; a `ready` file marks it done).
Each test session then builds a wheel of the checkout as it is now and installs it, without
its dependencies, into a venv of its own whose `.pth` file adds the shared venv's packages.
Paths are the same on both sides (the shared directory is bind-mounted at its own path).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.lxc import Container, LxcUnavailable

#: PATH for commands in the container (`--clear-env`: nothing of this machine's environment).
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def attach(ct: Container, argv: Sequence[str], *, user: str | None = None, home: str | None = None,
           cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
           timeout: float = 180, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run argv in the container with a clean environment (PATH, HOME, LANG and `env` only),
    as root or, through sudo, as `user`; `stdin`, where given, is its input."""
    words = ["env", "-i", *([f"--chdir={cwd}"] if cwd else []), f"PATH={PATH}", "LANG=C.UTF-8",
             f"HOME={home or ('/root' if user is None else f'/home/{user}')}",
             *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
    if user is not None:
        words = ["sudo", "-u", user, "--", *words]
    return subprocess.run(["lxc-attach", "-n", ct.name, "--clear-env", "--", *words],
                          capture_output=True, text=True, timeout=timeout, input=stdin)


def _checked(what: str, proc: subprocess.CompletedProcess[str]) -> str:
    if proc.returncode != 0:
        raise LxcUnavailable(f"{what} failed (rc {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


@dataclass(frozen=True)
class Target:
    """The container's interpreter, as `pip download` names it."""

    version: str  # "3.11"
    machine: str  # "x86_64"
    glibc: tuple[int, int]

    def pip_options(self) -> list[str]:
        # pip does not widen a manylinux_2_N platform to the older ones it includes: name them all
        platforms = [f"manylinux_2_{minor}_{self.machine}" for minor in range(self.glibc[1], 4, -1)]
        platforms += [f"manylinux2014_{self.machine}", f"manylinux2010_{self.machine}", f"manylinux1_{self.machine}"]
        nodot = self.version.replace(".", "")
        return ["--only-binary=:all:", "--python-version", self.version, "--implementation", "cp",
                "--abi", f"cp{nodot}", *(a for p in platforms for a in ("--platform", p))]


def _target(ct: Container) -> Target:
    out = _checked("python3 in the container", attach(ct, ["python3", "-c", (
        "import json, platform, sys; print(json.dumps([f'{sys.version_info[0]}.{sys.version_info[1]}', "
        "platform.machine(), platform.libc_ver()[1]]))")]))
    version, machine, libc = json.loads(out)
    major, minor = (int(x) for x in libc.split(".")[:2])
    return Target(version, machine, (major, minor))


def dependencies(root: Path) -> list[str]:
    with (root / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def deps_venv(ct: Container, root: Path) -> Path:
    """The shared venv with opsrunner's dependencies for the container's python3 (made once)."""
    deps = dependencies(root)
    target = _target(ct)
    key = hashlib.sha256(json.dumps([deps, target.version, target.machine, target.glibc]).encode()).hexdigest()[:16]
    cache = ct.share / "python"
    cache.mkdir(parents=True, exist_ok=True)
    base = cache / f"deps-{key}"
    lock = open(cache / ".lock", "a")  # noqa: SIM115 - held across the whole build
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (base / "ready").exists():
            return base / "venv"
        shutil.rmtree(base, ignore_errors=True)
        wheels = base / "wheels"
        wheels.mkdir(parents=True)
        _checked(f"pip download of opsrunner's dependencies for the container's Python {target.version}",
                 subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
                                 *target.pip_options(), *deps], capture_output=True, text=True, timeout=600))
        _checked("python3 -m venv in the container", attach(ct, ["python3", "-m", "venv", str(base / "venv")]))
        _checked("pip install --no-index of the dependencies in the container", attach(ct, [
            str(base / "venv" / "bin" / "pip"), "install", "--quiet", "--no-index", "--find-links", str(wheels),
            *deps], timeout=600))
        (base / "ready").write_text(json.dumps({"dependencies": deps, "python": target.version}) + "\n")
        # dependency sets of earlier checkouts, unused for a day
        for old in cache.glob("deps-*"):
            if old != base and time.time() - old.stat().st_mtime > 86400:
                shutil.rmtree(old, ignore_errors=True)
        return base / "venv"
    finally:
        lock.close()


def _build_wheel(root: Path, dest: Path) -> Path:
    """A wheel of the checkout as it is now (built from a copy: nothing is written into it)."""
    with tempfile.TemporaryDirectory(prefix="opsrunner-src-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(root / name, src / name)
        shutil.copytree(root / "opsrunner", src / "opsrunner", ignore=shutil.ignore_patterns("__pycache__"))
        _checked("pip wheel of the checkout", subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dest), str(src)],
            capture_output=True, text=True, timeout=600))
    (wheel,) = dest.glob("opsrunner-*.whl")
    return wheel


def install(ct: Container, root: Path, folder: Path) -> Path:
    """opsrunner from the checkout in a venv at folder/venv (in the shared directory), for the
    container's python3; returns the venv. Remove the folder to remove it."""
    deps = deps_venv(ct, root)
    wheel = _build_wheel(root, folder / "dist")
    venv = folder / "venv"
    _checked("python3 -m venv --without-pip in the container",
             attach(ct, ["python3", "-m", "venv", "--without-pip", str(venv)]))
    purelib = _checked("sysconfig in the container", attach(ct, [
        str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])).strip()
    shared = _checked("sysconfig in the container", attach(ct, [
        str(deps / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])).strip()
    Path(purelib, "opsrunner-test-deps.pth").write_text(shared + "\n")
    _checked("pip install of the opsrunner wheel in the container", attach(ct, [
        str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", str(wheel)]))
    version = attach(ct, [str(venv / "bin" / "opsrunner"), "--version"])
    _checked("opsrunner --version in the container", version)
    return venv
