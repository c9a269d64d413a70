"""A real LXC system container for the tests: `pct exec CTID --` on Proxmox runs
`lxc-attach -n CTID --keep-env --`, so the suite runs its remote tests through that too.

The container (Debian bookworm, systemd, python3, cron, sudo) is created once under a fixed
name and reused while it exists, so later runs - and CI on the same machine - pay the
creation (one to two minutes) only when it is missing or was made by another version of
examples/lxc/make_container.sh (its hash is kept in the READY mark). Its network is the host's
(`lxc.net.0.type = none`): no bridge; the template's DHCP client and sshd are switched off
before its first boot, so nothing in it talks to the network (only debootstrap and the
container's apt, while it is created, reach Debian's package archive). A host directory is
bind-mounted at the same path inside, so a test prepares and reads files on either side
with the same path. Processes in the container are visible in this machine's /proc under
their host pids: tests find and stop them by marker exactly as they do on the host.

Where containers cannot run here (not root, lxc missing, no namespaces or cgroups), the
reason is reported and the tests that need the container are skipped with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

NAME = os.environ.get("OPSRUNNER_TEST_LXC_NAME", "opsrunner-ct")
#: Bind-mounted at the same path inside the container. Under /var/tmp: the agent's path guard
#: refuses to delete in system trees such as /var/lib, and the tests delete in here.
SHARE = Path("/var/tmp/opsrunner-tests") / NAME
#: A comment line in the container's config: the suite only ever rebuilds a container it made.
MARK = "# opsrunner test container: made and reused by tests/lxc.py"
#: Written last when creation succeeded, naming the hash of the make_container.sh that made it;
#: a container with the mark but without it, or made by another version of the script, is rebuilt.
READY = "opsrunner-test-ready"
TOOLS = ("lxc-create", "lxc-start", "lxc-attach", "lxc-info", "lxc-destroy", "lxc-config", "debootstrap")
#: How the README makes a rehearsal container; the suite makes its own the same way.
MAKE_CONTAINER = Path(__file__).resolve().parent.parent / "examples" / "lxc" / "make_container.sh"
#: `OPSRUNNER_TEST_LXC=off` skips the container tests; `=require` fails them where it cannot run.
MODE = os.environ.get("OPSRUNNER_TEST_LXC", "auto")


def recipe_hash() -> str:
    """What the READY mark records: a container made by an older recipe is made again."""
    return hashlib.sha256(MAKE_CONTAINER.read_bytes()).hexdigest()[:16]


def ready_text() -> str:
    return f"made by {MAKE_CONTAINER.name} sha256:{recipe_hash()} for the opsrunner test suite\n"


class LxcUnavailable(Exception):
    """The container cannot be had on this machine; the message is the exact reason."""


@dataclass
class Container:
    name: str
    share: Path
    init_pid: int
    users_fd: int  # held with a shared lock while this session uses the container

    @property
    def attach(self) -> str:
        """The wrapper prefix, exactly what `pct exec` runs."""
        return f"lxc-attach -n {self.name} --keep-env --"

    def pidns(self) -> str:
        return os.readlink(f"/proc/{self.init_pid}/ns/pid")

    def target_pid(self, host_pid: int) -> int | None:
        """The pid the container sees for a host pid (None: not a process of the container)."""
        try:
            if os.readlink(f"/proc/{host_pid}/ns/pid") != self.pidns():
                return None
            for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
        except OSError:
            return None
        return None

    def host_pid(self, target_pid: int) -> int:
        """The host pid of the container's process `target_pid` (as its pidfiles record it)."""
        for name in os.listdir("/proc"):
            if name.isdigit() and self.target_pid(int(name)) == target_pid:
                return int(name)
        raise LookupError(f"no process {target_pid} in container {self.name}")

    def release(self) -> None:
        """Stop the container when a test session started it and this is the last session
        using it. Sessions run side by side (pytest-xdist's workers are sessions each): the one
        that started it may end first, so the mark of a start by the suite is a file, and
        whichever session ends last (the only one that can lock the users' file exclusively)
        stops it. Under the setup lock: no session starts using it meanwhile."""
        with _locked(self.share, "lock"):
            try:
                with contextlib.suppress(OSError):
                    fcntl.flock(self.users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    mark = started_mark(self.name, self.share)
                    if mark.exists():
                        subprocess.run(["lxc-stop", "-n", self.name, "-t", "20"], capture_output=True, timeout=60)
                        mark.unlink(missing_ok=True)
            finally:
                os.close(self.users_fd)  # under the setup lock: a session starting meanwhile never waits


def started_mark(name: str, share: Path) -> Path:
    """Present while the container runs because a test session started it (not its owner)."""
    return share.parent / f".{name}.started-by-suite"


def preflight() -> str | None:
    """Why no container can run here, or None. Cheap checks only; starting it tells the rest."""
    if MODE == "off":
        return "disabled by OPSRUNNER_TEST_LXC=off"
    if sys.platform != "linux":
        return f"LXC needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"needs root for a system container and lxc-attach (running as uid {os.geteuid()})"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (sh tests/setup_lxc.sh installs lxc and debootstrap)"
    probe = ["unshare", "--mount", "--uts", "--ipc", "--pid", "--net", "--fork", "true"]
    res = subprocess.run(probe, capture_output=True, text=True)
    if res.returncode != 0:
        return f"cannot create namespaces: `{' '.join(probe)}`: {res.stderr.strip()}"
    return None


def _lxc(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)


def _state(name: str) -> str | None:
    res = _lxc("lxc-info", "-n", name, "-sH")
    return res.stdout.strip() if res.returncode == 0 else None


def _tail(text: str, lines: int = 12) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def mount_entry(share: Path) -> str:
    return f"lxc.mount.entry = {share} {str(share).lstrip('/')} none bind,create=dir 0 0"


def _create(name: str, share: Path, log: Path) -> None:
    """The README's command for a rehearsal container, plus the mark and the shared directory."""
    mount = mount_entry(share)
    res = _lxc("sh", str(MAKE_CONTAINER), name, MARK, mount, timeout=1200)
    log.write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        # the script's own FAILED line names the reason (apt's error, ...); else its last lines
        own = [line for line in res.stderr.splitlines() if line.startswith(f"{MAKE_CONTAINER.name}:")]
        raise LxcUnavailable(f"{MAKE_CONTAINER.name} {name} failed (rc {res.returncode}): "
                             f"{own[-1] if own else _tail(res.stdout + res.stderr)} (full output: {log})")


def _start(name: str, log: Path) -> None:
    log.unlink(missing_ok=True)  # lxc-start appends: keep only this start's lines for the reason
    res = _lxc("lxc-start", "-n", name, "-l", "INFO", "-o", str(log), timeout=120)
    if res.returncode != 0 or _state(name) != "RUNNING":
        errors = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]
        raise LxcUnavailable(f"lxc-start -n {name} failed: {_tail(res.stderr + chr(10).join(errors), 6)}")


def _wait_booted(name: str, timeout: float = 90) -> None:
    """Until lxc-attach works, python3 >= 3.8 runs, and systemd has finished booting."""
    deadline = time.monotonic() + timeout
    last = ""
    python_ran = False
    while time.monotonic() < deadline:
        res = _lxc("lxc-attach", "-n", name, "--clear-env", "--", "python3", "-c",
                   "import subprocess, sys; assert sys.version_info >= (3, 8), sys.version;"
                   "print(subprocess.run(['systemctl', 'is-system-running'], stdout=subprocess.PIPE,"
                   " universal_newlines=True).stdout.strip())", timeout=30)
        last = _tail(res.stdout + res.stderr, 3)
        python_ran = res.returncode == 0
        if python_ran and last in ("running", "degraded"):
            return
        if "Operation not permitted" in res.stderr or "Permission denied" in res.stderr:
            raise LxcUnavailable(f"lxc-attach -n {name} is not permitted here: {last}")
        time.sleep(0.2)
    if python_ran:
        raise LxcUnavailable(f"systemd in container {name} did not finish booting in {timeout:.0f}s "
                             f"(systemctl is-system-running: {last})")
    raise LxcUnavailable(f"python3 does not run in container {name} "
                         f"(`lxc-attach -n {name} -- python3 -c ...`, {timeout:.0f}s): {last}")


def _lock_file(share: Path, kind: str) -> int:
    share.mkdir(parents=True, exist_ok=True)
    return os.open(share.parent / f".{share.name}.{kind}", os.O_RDWR | os.O_CREAT, 0o600)


@contextlib.contextmanager
def _locked(share: Path, kind: str) -> Iterator[None]:
    """The setup lock, exclusive: one session at a time creates, starts or stops the container."""
    fd = _lock_file(share, kind)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure(name: str = NAME, share: Path = SHARE) -> Container:
    """The running container: created when missing, started when stopped. Concurrent test
    sessions share it (a shared lock while in use). One a session started is stopped by the
    last session to end (Container.release); one that ran before the suite is left running."""
    reason = preflight()
    if reason:
        raise LxcUnavailable(reason)
    with _locked(share, "lock"):
        ct_dir = Path(_lxc("lxc-config", "lxc.lxcpath").stdout.strip() or "/var/lib/lxc") / name
        state = _state(name)
        if state is not None and MARK not in (ct_dir / "config").read_text(errors="replace"):
            raise LxcUnavailable(f"a container named {name} exists that the test suite did not make; "
                                 f"set OPSRUNNER_TEST_LXC_NAME to another name")
        ready = ct_dir / READY
        if state is not None and (not ready.exists() or ready.read_text(errors="replace") != ready_text()
                                  or mount_entry(share) not in (ct_dir / "config").read_text(errors="replace")):
            # ours, but its creation never finished, or made by another version of the script
            # (an older one could leave it without python3, cron, ...) or with another share
            _lxc("lxc-destroy", "-n", name, "-f", timeout=300)
            state = None
        created = state is None
        if created:
            _create(name, share, share.parent / f"{name}-create.log")
        if _state(name) != "RUNNING":
            _start(name, share.parent / f"{name}-start.log")
            started_mark(name, share).touch()
        _wait_booted(name)
        if created:
            ready.write_text(ready_text())
        pid = int(_lxc("lxc-info", "-n", name, "-pH").stdout.strip())
        users = _lock_file(share, "users")
        # In use: no other session stops it under us. Only a release holding the setup lock
        # (held here) takes this one exclusively, so this never waits.
        fcntl.flock(users, fcntl.LOCK_SH)
        return Container(name, share, pid, users)


@dataclass(frozen=True)
class TargetSide:
    """Where a transport's commands run, as a test on this machine sees it: the interpreter
    and demo trainer for commands there, a directory with the same path on both sides, and
    pid translation (a pidfile written in a container holds the container's pid)."""

    python: str
    trainer: Path
    work: Path
    container: Container | None = None

    def host_pid(self, target_pid: int) -> int:
        return self.container.host_pid(target_pid) if self.container else target_pid

    def target_pid(self, host_pid: int) -> int | None:
        return self.container.target_pid(host_pid) if self.container else host_pid


def stage_session_files(ct: Container, root: Path) -> Path:
    """A session directory in the shared one with the demo trainer and the hostile wrappers
    (run by the container's python3)."""
    session = Path(tempfile.mkdtemp(prefix="session-", dir=ct.share))
    for src in [*(root / "tests" / "wrappers").glob("*.py"), root / "examples" / "demo_trainer" / "train.py"]:
        shutil.copy2(src, session / src.name)
    return session
