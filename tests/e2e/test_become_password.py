"""become with a password, against real sudo and su in the test container: a user whose
sudoers rule needs its password, reached over the suite's ssh and the wrapper chain
(`lxc-attach`, then `runuser` to that user). The password comes from a vars file, or typed
at -K on a terminal (a pty); it must never show in a command line (sampled from /proc while
the run goes: the container's processes are this machine's too), nor in any output."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from opsrunner.secrets import MASK, Masker
from tests import lxc as lxc_rig
from tests.conftest import ROOT, write_inventory, write_yaml
from tests.helpers import read_events, task_ends
from tests.lxc_opsrunner import attach
from tests.sshd import PrivateSSHD

SUDOER, SUDOER_PW = "opsrunner-sudoer", "s3cret-Become-pw"
OTHER, OTHER_PW = "opsrunner-other", "0ther-Become-pw"


@pytest.fixture(scope="module")
def sudoer(lxc: lxc_rig.Container) -> str:
    """Inside the container only: two users with passwords, and a sudoers rule that asks for one."""
    # set -e: every step's failure shows; flock: sessions running side by side share the
    # container. The passwords go on stdin, never on a command line: another session's tests
    # watch every command line on this machine for them.
    script = ("set -e; exec 9>/run/opsrunner-test-users.lock; flock 9; "
              f"id {SUDOER} >/dev/null 2>&1 || useradd -m -s /bin/sh {SUDOER}; "
              f"id {OTHER} >/dev/null 2>&1 || useradd -m -s /bin/sh {OTHER}; chpasswd; "
              f"echo '{SUDOER} ALL=(ALL) ALL' > /etc/sudoers.d/{SUDOER}; chmod 440 /etc/sudoers.d/{SUDOER}")
    proc = attach(lxc, ["sh", "-c", script], stdin=f"{SUDOER}:{SUDOER_PW}\n{OTHER}:{OTHER_PW}\n")
    assert proc.returncode == 0, proc.stderr
    return SUDOER


def _chain(lxc: lxc_rig.Container, sudoer: str, hostile: Path | None = None) -> list[str]:
    """Into the container, then to the user whose sudo needs a password; with `hostile`, through
    the hostile wrappers (a session reaper and an fd holder) staged there too."""
    middle = [f"python3 {hostile / name} --" for name in ("session_reaper.py", "fd_holder.py")] if hostile else []
    return [lxc.attach, *middle, f"runuser -u {sudoer} -- env HOME=/home/{sudoer}"]


@pytest.fixture
def inv(tmp_path: Path, sshd: PrivateSSHD, lxc: lxc_rig.Container, sudoer: str) -> Path:
    return write_inventory(tmp_path / "inv.yml", {"ct": sshd.host_vars(wrapper=_chain(lxc, sudoer))})


class CmdlineWatch:
    """Every process's command line, sampled while a run goes: hits of a secret, and whether
    the become layer was seen at all (so that a sampler that saw nothing cannot pass)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.hits: list[str] = []
        self.saw_become = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    data = Path(f"/proc/{name}/cmdline").read_bytes()
                except OSError:
                    continue
                if self.secret in data:
                    self.hits.append(data.decode(errors="replace"))
                if b"opsrunner-become" in data:
                    self.saw_become = True
            time.sleep(0.005)

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "opsrunner", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)


def _run_on_pty(args: list[str], cwd: Path, answer: str, timeout: float = 120) -> tuple[int, str]:
    """The CLI on a terminal of its own (pty.fork): `answer` is typed at the password prompt."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: becomes the CLI
        os.chdir(cwd)
        os.environ["PYTHONPATH"] = str(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "opsrunner", *args])
    out, typed, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the CLI has exited
                    break
                if not chunk:
                    break
                out += chunk
            if not typed and b"BECOME password: " in out:
                os.write(fd, answer.encode() + b"\n")
                typed = True
        else:
            os.kill(pid, 9)
        status = os.waitpid(pid, 0)[1]
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


PLAY = """
- hosts: ct
  tasks:
    - {name: as root, command: id -u, become: true}
    - {name: as other, command: id -un, become: true, become_user: opsrunner-other}
    - name: script as root
      shell: "sleep 0.3; printf '%s\\n' \\"$(id -u)\\" \\"$GREETING\\""
      environment: {GREETING: hello}
      become: true
    - {name: plain, command: id -un}
    - name: copy as root
      copy: {content: "x\\n", dest: "{{ work }}/root-owned.txt"}
      become: true
    - {name: owner, command: "stat -c %u {{ work }}/root-owned.txt", become: true}
    - name: lock as root
      job_lock: {path: "{{ work }}/job.lock"}
      become: true
    - {name: lock holder, shell: "sleep 0.5; stat -c %u {{ work }}/job.lock", become: true}
"""


def _assert_nowhere(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text


@pytest.mark.lxc
@pytest.mark.parametrize("route", ["chain", "hostile chain", "agent"])
def test_sudo_with_the_password_from_a_vars_file(tmp_path: Path, route: str, sshd: PrivateSSHD,
                                                 lxc: lxc_rig.Container, sudoer: str, lxc_files: Path) -> None:
    """Commands as bare execs through the chain (the agent, under become, proves it first),
    through the hostile wrappers, or run by the agent itself; a file written by the agent and
    a held job lock, as root too."""
    work = lxc_files / f"become-{route.replace(' ', '-')}"
    work.mkdir()
    host = sshd.host_vars(wrapper=_chain(lxc, sudoer, lxc_files if route == "hostile chain" else None),
                          command_exec="agent" if route == "agent" else "auto", work=str(work))
    inv = write_inventory(tmp_path / "inv.yml", {"ct": host})
    write_yaml(tmp_path / "secrets.yml", {"become_password": SUDOER_PW})
    pb = tmp_path / "pb.yml"
    pb.write_text(PLAY)
    events = tmp_path / "ev.jsonl"
    history = tmp_path / "history.db"
    with CmdlineWatch(SUDOER_PW) as watch:
        proc = _run("play", str(pb), "-i", str(inv), "-e", "@secrets.yml", "-vvv", "--json-events",
                    str(events), "--history", str(history), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ev = read_events(events)
    shown = {name: [e["stdout_tail"] for e in task_ends(ev, name)]
             for name in ("as root", "as other", "script as root", "plain", "owner", "lock holder")}
    assert shown == {"as root": ["0"], "as other": [OTHER], "script as root": ["0\nhello"], "plain": [SUDOER],
                     "owner": ["0"], "lock holder": ["0"]}
    assert watch.saw_become and watch.hits == []
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("history.db*")).decode(errors="replace")
    _assert_nowhere(SUDOER_PW, proc.stdout, proc.stderr, events.read_text(), stored)


@pytest.mark.lxc
def test_ask_become_pass_on_a_terminal_with_become_from_the_command_line(tmp_path: Path, inv: Path) -> None:
    """-b and --become-user are defaults: the task's own keywords win, as in ansible-core."""
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "ct", "tasks": [
        {"name": "cli user", "command": "id -un"},
        {"name": "task user", "command": "id -u", "become_user": "root"},
        {"name": "not become", "command": "id -un", "become": False}]}])
    events = tmp_path / "ev.jsonl"
    with CmdlineWatch(SUDOER_PW) as watch:
        rc, out = _run_on_pty(["play", str(pb), "-i", str(inv), "-b", "--become-user", OTHER, "-K", "-vvv",
                               "--json-events", str(events), "--no-history"], tmp_path, SUDOER_PW)
    assert rc == 0, out
    ev = read_events(events)
    assert [e["stdout_tail"] for e in task_ends(ev, "cli user")] == [OTHER]
    assert [e["stdout_tail"] for e in task_ends(ev, "task user")] == ["0"]
    assert [e["stdout_tail"] for e in task_ends(ev, "not become")] == [SUDOER]
    assert watch.saw_become and watch.hits == []
    _assert_nowhere(SUDOER_PW, out, events.read_text())


@pytest.mark.lxc
def test_a_wrong_password_fails_the_host_fast_and_clearly(tmp_path: Path, inv: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "ct", "tasks": [{"name": "root", "command": "id -u",
                                                                     "become": True}]}])
    started = time.monotonic()
    proc = _run("play", str(pb), "-i", str(inv), "-e", "become_password=not-the-password", "--no-history",
                cwd=tmp_path, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "become: the become password was refused on ct (to run as root)" in proc.stdout
    assert "incorrect password attempt" in proc.stdout
    assert "not-the-password" not in proc.stdout + proc.stderr
    assert took < 10, took  # one sudo try (its delay after a wrong password: ~2 s)


@pytest.mark.lxc
def test_su_with_a_password(tmp_path: Path, inv: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "ct", "become": True, "become_method": "su",
                                           "become_user": OTHER, "tasks": [
        {"name": "who", "command": "id -un"},
        {"name": "stdin", "shell": "cat /etc/hostname >/dev/null; echo \"$0 ran\""},
        {"name": "fails", "shell": "echo own-error >&2; exit 1", "ignore_errors": True}]}])
    write_yaml(tmp_path / "vars.yml", {"ansible_become_pass": OTHER_PW})
    events = tmp_path / "ev.jsonl"
    with CmdlineWatch(OTHER_PW) as watch:
        proc = _run("play", str(pb), "-i", str(inv), "-e", "@vars.yml", "-vvv", "--json-events", str(events),
                    "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ev = read_events(events)
    assert [e["stdout_tail"] for e in task_ends(ev, "who")] == [OTHER]
    assert [e["stdout_tail"] for e in task_ends(ev, "stdin")] == ["/bin/sh ran"]
    (failed,) = task_ends(ev, "fails")  # the command's own failure, not taken for a refused password
    assert "own-error" in str(failed) and "refused" not in str(failed)
    assert "Password:" not in proc.stdout  # su's prompt stays on its own terminal
    assert watch.saw_become and watch.hits == []
    _assert_nowhere(OTHER_PW, proc.stdout, proc.stderr, events.read_text())


@pytest.mark.lxc
def test_su_with_a_wrong_password_fails_the_host_fast(tmp_path: Path, inv: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "ct", "tasks": [
        {"name": "who", "command": "id -un", "become": True, "become_method": "su", "become_user": OTHER}]}])
    started = time.monotonic()
    proc = _run("play", str(pb), "-i", str(inv), "-e", "become_password=not-the-password", "--no-history",
                cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"become: the become password was refused on ct (to run as {OTHER}): su: Authentication failure" \
        in proc.stdout
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("name", ["become_password", "ansible_become_password", "ansible_become_pass"])
def test_the_become_password_is_secret_whatever_the_patterns(name: str) -> None:
    masker = Masker()
    variables: dict[str, Any] = {"secret_name_patterns": ["*nothing*"], name: "hunter2-pw"}
    masker.add_vars(variables)
    assert masker.mask("sudo said hunter2-pw") == f"sudo said {MASK}"
    assert masker.mask_vars({name: "x"}) == {name: MASK}


def test_ask_become_pass_without_a_terminal_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "pb.yml").write_text("- hosts: localhost\n  tasks: [{name: t, command: 'true'}]\n")
    started = time.monotonic()
    proc = _run("play", "pb.yml", "-K", cwd=tmp_path, timeout=30)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "-K/--ask-become-pass: no terminal to read the become password from" in proc.stderr
    assert time.monotonic() - started < 20


def test_command_line_become_is_a_default_that_plays_and_tasks_override(tmp_path: Path) -> None:
    """What ansible-core 2.19 does with `-b --become-user U` (checked with a stand-in become_exe):
    a task without keywords becomes U, a play's or task's become_user wins, `become: false` wins."""
    if os.geteuid() != 0:
        pytest.skip("su without a password needs root")
    inv = write_inventory(tmp_path / "inv.yml", {"t": {"connection": "local"}})
    pb = write_yaml(tmp_path / "pb.yml", [
        {"hosts": "t", "tasks": [{"name": "cli", "command": "id -un"},
                                 {"name": "task", "command": "id -un", "become_user": "daemon"},
                                 {"name": "off", "command": "id -un", "become": False}]},
        {"hosts": "t", "become_user": "daemon", "tasks": [{"name": "play", "command": "id -un"}]}])
    events = tmp_path / "ev.jsonl"
    proc = _run("play", str(pb), "-i", str(inv), "-b", "--become-user", "nobody", "--become-method", "su",
                "--json-events", str(events), "--no-history", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ev = read_events(events)
    assert {name: [e["stdout_tail"] for e in task_ends(ev, name)] for name in ("cli", "task", "off", "play")} == {
        "cli": ["nobody"], "task": ["daemon"], "off": ["root"], "play": ["daemon"]}


def test_the_password_typed_at_ask_become_pass_is_one_of_the_runs_secrets(tmp_path: Path) -> None:
    from opsrunner import api
    from opsrunner.becomeopts import BecomeDefaults

    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: localhost\n  tasks: [{name: t, command: 'true'}]\n")
    request = api.PlayRequest(playbook=pb, become=BecomeDefaults(become=True, password="typed-at-K"))
    assert "typed-at-K" not in repr(request)
    assert api.load(request).masker.mask("sudo: typed-at-K") == f"sudo: {MASK}"
