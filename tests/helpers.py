"""Running the CLI in-process and as a subprocess, for tests."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsrunner.cli import main

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliResult:
    rc: int
    out: str
    err: str

    def events(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()]


def cli(*args: str, cwd: Path | None = None) -> CliResult:
    """Run the CLI in this process (fast); cwd is switched for the call."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    if cwd:
        os.chdir(cwd)
    try:
        rc = main(list(args), out, err)
    finally:
        os.chdir(old)
    return CliResult(rc, out.getvalue(), err.getvalue())


def cli_subprocess(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 120) -> CliResult:
    """Run `python -m opsrunner` as a separate process, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "opsrunner", *args], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def task_ends(events: list[dict[str, Any]], task: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] in ("task_end", "handler_end") and (task is None or e["task"] == task)]


def stop(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """End a process the test started, whatever it does with signals, and reap it: SIGTERM
    (opsrunner stops its remote work on it, as on Ctrl-C; a background shell's `nohup ... &`
    leaves SIGINT and SIGHUP ignored, never SIGTERM), then SIGKILL by pid after `grace`, and
    SIGKILL to its process group where it leads one of its own. Its pipes are closed."""
    group = None
    with contextlib.suppress(OSError):
        if proc.returncode is None and os.getpgid(proc.pid) == proc.pid != os.getpgrp():
            group = proc.pid  # looked up before the reap, while the pid is still this process
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
    if group is not None:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)  # what it started in its group, still running
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


@contextlib.contextmanager
def started(argv: list[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """`subprocess.Popen(argv, **popen)`, ended by `stop` when the block ends, pass or fail."""
    proc = subprocess.Popen(argv, **popen)
    try:
        yield proc
    finally:
        stop(proc)


def opsrunner_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                      **popen: Any) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    """`python -m opsrunner ARGS` running while the block runs (output piped, text, stderr
    into stdout unless given), ended by `stop` when it ends."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, **popen}
    return started([sys.executable, "-m", "opsrunner", *args], cwd=cwd or ROOT, env=full_env, **popen)


class ProjectEnv:
    """A project under `root/proj` whose schedules, units, crontab, history database and
    state all live under `root`: nothing reaches the machine's systemd, crontab or home."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "proj"
        self.project.mkdir(parents=True, exist_ok=True)
        self.history_db = root / "history.db"
        self.vars = {"OPSRUNNER_SCHEDULES": str(root / "schedules"), "OPSRUNNER_UNIT_DIR": str(root / "units"),
                     "OPSRUNNER_HISTORY": str(self.history_db), "OPSRUNNER_CRONTAB": str(root / "crontab"),
                     "XDG_STATE_HOME": str(root / "state"), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 180) -> CliResult:
        """`python -m opsrunner ARGS` in the project (or `cwd`), with this environment."""
        return cli_subprocess(*args, cwd=cwd or self.project, env=self.vars, timeout=timeout)

    def history(self) -> list[dict[str, Any]]:
        res = self.run("history", "--json")
        assert res.rc == 0, res.err
        return list(json.loads(res.out))


#: `crontab -l` and `crontab -` as cron's own command has them, on a file (FILE in the script).
_CRONTAB_COMMAND = """#!/bin/sh
# The user's crontab for a test, kept in FILE: what cron would read. Never the machine's.
case "$1" in
  -l) [ -f 'FILE' ] || { echo "no crontab for $(id -un)" >&2; exit 1; }; cat 'FILE' ;;
  -) cat > 'FILE' ;;
  *) echo "crontab: only -l and - here" >&2; exit 1 ;;
esac
"""


def user_crontab(root: Path, env: dict[str, str]) -> Path:
    """Schedules added with --cron in `env` go to a user's crontab, as where cron is installed,
    and are active (`schedule list` gives their next run), instead of $OPSRUNNER_CRONTAB's file,
    which is only written: a `crontab` command first on PATH (root/crontab-bin) keeps that
    crontab in root/crontab, its path returned. The machine's crontab is never read or written."""
    crontab, folder = root / "crontab", root / "crontab-bin"
    folder.mkdir(parents=True, exist_ok=True)
    command = folder / "crontab"
    command.write_text(_CRONTAB_COMMAND.replace("FILE", str(crontab)))
    command.chmod(0o755)
    env.update(OPSRUNNER_CRONTAB="", PATH=f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return crontab
