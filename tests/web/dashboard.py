"""The dashboard as tests use it: a real `opsrunner serve` on 127.0.0.1 and a free port,
a project with real `opsrunner play` runs to show, and a plain HTTP client."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import write_yaml
from tests.helpers import CliResult, cli_subprocess, opsrunner_process
from tests.lifeline import Lifeline

FAILING = [{"name": "Console demo", "hosts": "all", "tasks": [
    {"name": "Say hello", "shell": "echo hello"},
    {"name": "Break with the token", "fail": {"msg": "cannot go on with {{ api_token | default('-') }}"},
     "when": "break_it | default(false) | bool"},
]}]


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[str]

    def get(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> Response:
        request = urllib.request.Request(self.url + path, method=method, headers=headers or {})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never a proxy
        try:
            with opener.open(request, timeout=30) as r:
                return Response(r.status, r.read(), dict(r.headers))
        except urllib.error.HTTPError as exc:
            return Response(exc.code, exc.read(), dict(exc.headers))


class Project:
    """A project folder, its own history database and schedules folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "proj"
        self.db = root / "history.db"
        self.env = {"OPSRUNNER_HISTORY": str(self.db), "OPSRUNNER_SCHEDULES": str(root / "schedules"),
                    "OPSRUNNER_CRONTAB": str(root / "crontab"), "OPSRUNNER_UNIT_DIR": str(root / "units"),
                    "XDG_STATE_HOME": str(root / "state"), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        write_yaml(self.dir / "site.yml", FAILING)
        write_yaml(self.dir / "inv.yml", {"all": {"hosts": {"web1": {"connection": "local"},
                                                            "web2": {"connection": "local"}}}})

    def run(self, *args: str, timeout: float = 180) -> CliResult:
        return cli_subprocess(*args, cwd=self.dir, env=self.env, timeout=timeout)

    def play(self, *args: str) -> str:
        """A real `opsrunner play` of site.yml; its run id (the last one recorded)."""
        self.run("play", "site.yml", "-i", "inv.yml", *args)
        listing = self.run("history", "--json", "-n", "1")
        return str(json.loads(listing.out)[0]["id"])


@contextlib.contextmanager
def serving(project: Project, *args: str) -> Iterator[Server]:
    """`opsrunner serve` on 127.0.0.1 and a port the kernel picks, stopped by pid when the block
    ends, or by its watchdog (tests/lifeline.py) when the pytest that started it dies first
    (after it was told of it: a pytest killed between the start and watch() leaves it)."""
    lifeline = Lifeline()
    try:
        with opsrunner_process("serve", "--port", "0", *args, cwd=project.dir, env=project.env) as proc:
            lifeline.watch(proc.pid)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.search(r"on (http://\S+/) ", line)
            if not match:  # the block's end stops it (tests.helpers.started), pass or fail
                raise AssertionError(f"serve did not start: {line}{proc.stdout.read()}")
            yield Server(match.group(1).rstrip("/"), proc)
    finally:
        lifeline.close()


def wait_until(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())
