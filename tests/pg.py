"""A private PostgreSQL cluster for the shared-history tests: Debian's binaries
(/usr/lib/postgresql/<N>/bin, installed by tests/setup_postgres.sh), initdb in a temp dir of
its own, listening on 127.0.0.1 and a free port, its unix socket in that dir. Run as the
`postgres` user when the suite runs as root (the server refuses root). Stopped by pid, by
the fixture's teardown, or by its watchdog (tests/lifeline.py) when the pytest that started
it dies without one (SIGKILL, a CI timeout): that also removes its temp dir.

OPSRUNNER_TEST_POSTGRES=require (.ci/run): a cluster that cannot start fails the tests
instead of skipping them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.lifeline import Lifeline
from tests.sshd import free_port

MODE = os.environ.get("OPSRUNNER_TEST_POSTGRES", "auto")
#: The role the tests' controllers connect as, and its password (asked over TCP: scram-sha-256).
ROLE, PASSWORD, DATABASE = "opsrunner", "pg-S3cret-9f1d", "opsrunner"


class PostgresUnavailable(Exception):
    pass


@dataclass
class PrivatePostgres:
    root: Path
    bindir: Path
    port: int
    pid: int
    run_as: str | None
    #: Stops the server when the pytest that started it dies (tests/lifeline.py).
    lifeline: Lifeline | None = None

    def url(self, database: str = DATABASE, password: str | None = PASSWORD) -> str:
        secret = f":{password}" if password is not None else ""
        return f"postgresql://{ROLE}{secret}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """`sql` as the cluster's superuser over its unix socket (trusted there)."""
        cmd = [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(self.root),
               "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql]
        return _run(cmd, self.run_as).stdout

    def new_database(self, name: str) -> str:
        """An empty database owned by the tests' role; its URL (with the password)."""
        self.psql(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)  # "fast" shutdown: running sessions are ended
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _alive(self.pid):
            time.sleep(0.05)
        if _alive(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.lifeline is not None:
            self.lifeline.close()


def find_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie of ours is gone for this purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def _run(cmd: list[str], run_as: str | None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full = ["runuser", "-u", run_as, "--", *cmd] if run_as else cmd
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        raise PostgresUnavailable(f"{' '.join(cmd[:2])}: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return proc


def start_postgres() -> PrivatePostgres:
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable("no /usr/lib/postgresql/<N>/bin/initdb (tests/setup_postgres.sh installs it)")
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise PostgresUnavailable(f"psycopg is not installed ({exc}): pip install -e '.[test]'") from None
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root and no `postgres` user to run the server as") from None
        run_as = "postgres"
    root = Path(tempfile.mkdtemp(prefix="opsrunner-pg-"))
    # Before the server, told of its pid file before pg_ctl runs: a pytest killed while it starts leaves none.
    lifeline = Lifeline(remove=root)
    if run_as:
        shutil.chown(root, run_as)
    try:
        return _init_and_start(root, bindir, run_as, lifeline)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        lifeline.close()
        raise


def _init_and_start(root: Path, bindir: Path, run_as: str | None, lifeline: Lifeline) -> PrivatePostgres:
    pwfile = root / "superuser.pw"
    pwfile.write_text("unused-superuser-pw\n")
    if run_as:
        shutil.chown(pwfile, run_as)
    data = root / "data"
    _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--pwfile", str(pwfile), "-A", "trust",
          "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"], run_as, timeout=120)
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=60"
    # pg_ctl daemonizes the server (a session of its own): its pid is read from its pid file
    lifeline.watch_pidfile(data / "postmaster.pid", str(data), signal.SIGINT)  # SIGINT: "fast" shutdown
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-o", options, "-w", "-t", "60",
          "start"], run_as, timeout=90)
    pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    server = PrivatePostgres(root, bindir, port, pid, run_as, lifeline)
    try:
        server.psql(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        server.psql(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
    except BaseException:
        server.stop()
        raise
    return server
