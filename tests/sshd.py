"""A private OpenSSH sshd on 127.0.0.1 for the tests: own keys, own config, random port.

Nothing of the machine's ssh setup is read or changed. The daemon is stopped by pid: by its owner, or by its
watchdog (tests/lifeline.py) when the pytest that started it dies without stopping it.
The sessions it serves get the test suite's process markers (the OPSTEST_* variables of
tests/procguard.py) in their environment: sshd builds that environment afresh, so they are
set with `SetEnv`.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.lifeline import Lifeline

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")


def find_sshd() -> str | None:
    for path in SSHD_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PrivateSSHD:
    root: Path
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    host_pub: str
    proc: subprocess.Popen[bytes]
    #: Stops the daemon when the pytest that started it dies (tests/lifeline.py).
    lifeline: Lifeline | None = None

    def host_vars(self, **extra: object) -> dict[str, object]:
        base: dict[str, object] = {
            "connection": "ssh", "host": "127.0.0.1", "port": self.port, "user": self.user,
            "key_file": str(self.key_file), "known_hosts_file": str(self.known_hosts),
        }
        base.update(extra)
        return base

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; by pid, and reaped."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.lifeline is not None:
            self.lifeline.close()


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 10) -> None:
    """Until the sshd started as `proc` accepts connections on 127.0.0.1:port; RuntimeError
    with its log if it exits first or does not listen in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} within {timeout:g}s: {log.read_text()}")


def start_sshd(root: Path, extra_config: tuple[str, ...] = ()) -> PrivateSSHD:
    sshd = find_sshd()
    if sshd is None:
        raise RuntimeError("sshd not found: install openssh-server (.ci/run does)")
    root.mkdir(parents=True, exist_ok=True)
    for name in ("host_ed25519", "client_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"opsrunner-test-{name}",
                        "-f", str(root / name)], check=True)
    (root / "authorized_keys").write_text((root / "client_ed25519.pub").read_text())
    port = free_port()
    # sshd reads only its first SetEnv line: the markers join the caller's, if it has one.
    markers = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPSTEST_")]
    if markers:
        setenv = [i for i, line in enumerate(extra_config) if line.lower().split()[:1] == ["setenv"]]
        extra_config = tuple(f"{line} {' '.join(markers)}" if i == (setenv or [-1])[0] else line
                             for i, line in enumerate(extra_config))
        if not setenv:
            extra_config += (f"SetEnv {' '.join(markers)}",)
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_ed25519'}",
        f"PidFile {root / 'sshd.pid'}", f"AuthorizedKeysFile {root / 'authorized_keys'}",
        "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        # extra_config first: sshd keeps the first value it reads for a keyword.
        *extra_config,
        "UsePAM no", "StrictModes no", "PermitRootLogin prohibit-password", "LogLevel INFO",
        "MaxSessions 200", "MaxStartups 200:30:300", "PrintMotd no", "UseDNS no",
        "Subsystem sftp internal-sftp", "",
    ]))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
    # Before the daemon, told of it right after: a pytest killed in between (microseconds) leaves it.
    lifeline = Lifeline()
    proc = None
    try:
        with (root / "sshd.log").open("wb") as log:
            proc = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=log)
        lifeline.watch(proc.pid)
    except BaseException:
        if proc is not None:  # a daemon the watchdog may not know of is not left running
            proc.terminate()
            proc.wait()
        lifeline.close()
        raise
    server = PrivateSSHD(root, port, getpass.getuser(), root / "client_ed25519", root / "known_hosts", "", proc,
                         lifeline)
    try:
        host_pub = (root / "host_ed25519.pub").read_text().split()
        server.host_pub = f"{host_pub[0]} {host_pub[1]}"
        server.known_hosts.write_text(f"[127.0.0.1]:{port} {server.host_pub}\n")
        wait_listening(proc, port, root / "sshd.log")
    except BaseException:
        server.stop()  # a daemon that does not serve is not left running
        raise
    return server


def accepted_logins(server: PrivateSSHD) -> int:
    """How many ssh logins the test sshd has accepted so far (from its own log)."""
    return (server.root / "sshd.log").read_text(errors="replace").count("Accepted publickey")
