"""Output that cannot be written (a full disk; here RLIMIT_FSIZE, whose EFBIG stands for
ENOSPC) never stops a run, and is always told: from when (to when, where later output got
through), on stderr and in the run's record. A read command whose output is cut exits 1."""

from __future__ import annotations

import json
import os
import pty
import re
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, write_yaml

#: The file-size limit of the command under test; the history stays far below it.
LIMIT = 1 << 20
TIME = r"\d\d:\d\d:\d\d"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {"h1": {"connection": "local"}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "step one", "command": "true"}, {"name": "step two", "command": "true"}]}])
    return proj


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "OPSRUNNER_HISTORY": str(db), "PYTHONPATH": str(ROOT)}


def _opsrunner(project: Path, db: Path, log: Path, room: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`opsrunner ARGS >> log` with `room` bytes left in the log below the file-size limit."""
    log.write_bytes(b"." * (LIMIT - room))
    with log.open("ab") as out:
        return subprocess.run([sys.executable, "-m", "opsrunner", *args], cwd=project, env=_env(db), stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=_limited)


def _history(project: Path, db: Path) -> list[dict[str, object]]:
    res = subprocess.run([sys.executable, "-m", "opsrunner", "history", "--json"], cwd=project, env=_env(db),
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout))


def test_a_recap_cut_by_a_full_file_is_told(project: Path, tmp_path: Path) -> None:
    """The disk fills partway through the recap, the command's last write: a part of it is
    written, and the rest was dropped silently (exit 0, no warning, the log cut mid-recap)."""
    db, log = tmp_path / "h.db", tmp_path / "out.log"
    whole = _opsrunner(project, db, log, LIMIT, "play", "ok.yml", "-i", "inv.yml")
    assert whole.returncode == 0 and whole.stderr == "", whole.stderr
    output = log.read_bytes()
    assert output.rstrip().endswith(b"ignored=0"), output  # the recap's last line
    proc = _opsrunner(project, db, log, len(output) - 20, "play", "ok.yml", "-i", "inv.yml")
    assert proc.returncode == 0, proc.stderr  # the play's own exit code
    assert log.stat().st_size == LIMIT  # all but the recap's last 20 bytes were written
    assert "WARNING: the output could not be written from " in proc.stderr, proc.stderr
    assert proc.stderr.endswith(": File too large; the rest of it was dropped, and the command went on to its "
                                "end\n"), proc.stderr
    last = _history(project, db)[0]
    assert [n for n in last["notes"] if n.startswith("the run's output could not be written from ")], last  # type: ignore[attr-defined]


def test_json_events_to_a_full_device_never_stop_the_run(project: Path, tmp_path: Path) -> None:
    """--json-events FILE on a full disk (/dev/full: every write is ENOSPC): the run goes on to
    its end (it stopped after its first task, exit 250), and the loss is told on stderr and in
    its record."""
    db, marker = tmp_path / "h.db", tmp_path / "marker"
    write_yaml(project / "two.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "step one", "command": "true"},
        {"name": "then mark", "copy": {"content": "x", "dest": str(marker)}}]}])
    proc = subprocess.run([sys.executable, "-m", "opsrunner", "play", "two.yml", "-i", "inv.yml", "--json-events",
                           "/dev/full"], cwd=project, env=_env(db), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert marker.read_text() == "x"  # the second task ran
    assert "PLAY RECAP" in proc.stdout, proc.stdout
    assert proc.stderr.startswith("WARNING: the JSON events (--json-events /dev/full) could not be written from "), \
        proc.stderr
    assert proc.stderr.endswith(": No space left on device; the rest of it was dropped, and the run went on to "
                                "its end\n"), proc.stderr
    [row] = _history(project, db)
    assert any(str(n).startswith("the run's JSON events (--json-events /dev/full) could not be written from ")
               and str(n).endswith(": No space left on device; the run went on to its end")
               for n in row["notes"]), row  # type: ignore[attr-defined]


@pytest.mark.parametrize("args", [("history", "--json"), ("schema", "playbook"), ("check", "ok.yml", "-i", "inv.yml")])
def test_a_read_command_whose_output_is_cut_exits_1(project: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    """`opsrunner history --json > file && use file` must not use a cut file: exit 1, as
    coreutils on a full disk, with the reason on stderr."""
    db, log = tmp_path / "h.db", tmp_path / "out.log"
    _opsrunner(project, db, log, LIMIT, "play", "ok.yml", "-i", "inv.yml")  # a run to list
    proc = _opsrunner(project, db, log, 10, *args)
    assert proc.returncode == 1, proc.stderr
    assert "ERROR: the output could not be written from " in proc.stderr, proc.stderr
    assert proc.stderr.rstrip().endswith("File too large; the rest of it was dropped: it is cut"), proc.stderr


def test_output_goes_on_where_the_file_takes_it_again(project: Path, tmp_path: Path) -> None:
    """A disk full for a moment: output lost from then, and written again once it fits (tried
    again a second later); told as `from T1 to T2`, not all output dropped for the rest of the run."""
    db, log = tmp_path / "h.db", tmp_path / "out.log"
    write_yaml(project / "gap.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "a long name " + "x" * 300, "command": "true"},
        {"name": "room again", "shell": f"sleep 1.5 && truncate -s 0 {log}"},
        {"name": "after the gap", "command": "true"}]}])
    proc = _opsrunner(project, db, log, 100, "play", "gap.yml", "-i", "inv.yml")
    assert proc.returncode == 0, proc.stderr
    written = log.read_text()
    assert "TASK [after the gap]" in written and "PLAY RECAP" in written, written
    assert "WARNING: the output could not be written from " in proc.stderr, proc.stderr
    import re

    assert re.search(rf"could not be written from {TIME} to {TIME}: File too large; what could not be written "
                     "was dropped, and the command went on to its end", proc.stderr), proc.stderr


def test_a_terminal_that_goes_away_never_stops_the_run(project: Path, tmp_path: Path) -> None:
    """SIGHUP (the ssh session that ran `opsrunner play` dropped): the run goes on to its end
    (it died between stopping the old job and starting the new one); its record says its
    output was lost when the terminal went away."""
    db, marker = tmp_path / "h.db", tmp_path / "started"
    write_yaml(project / "hup.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "stop old", "command": "sleep 2"},
        {"name": "start new", "copy": {"content": "x", "dest": str(marker)}}]}])
    pid, fd = pty.fork()
    if pid == 0:  # the child: opsrunner on the terminal
        os.chdir(project)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a login shell has it (the suite may run under nohup)
        os.execve(sys.executable, [sys.executable, "-m", "opsrunner", "play", "hup.yml", "-i", "inv.yml"], _env(db))
    seen = b""
    deadline = time.monotonic() + 60
    while b"TASK [stop old]" not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            seen += os.read(fd, 4096)
    os.close(fd)  # the terminal goes away: its session's processes get SIGHUP
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert marker.read_text() == "x"
    [row] = _history(project, db)
    assert row["exit_code"] == 0, row
    assert any(str(n).startswith("the run's output could not be written from ") and
               str(n).endswith(": the terminal went away; the run went on to its end") for n in row["notes"]), row  # type: ignore[attr-defined]


def _nonblocking_run(project: Path, db: Path, reader_sleeps: float) -> tuple[int, bytes]:
    """`opsrunner play big.yml` with its stdout a non-blocking pipe (OpenSSH's stdio where no
    tty) that its reader leaves unread for `reader_sleeps` s: its exit code and all it read."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    proc = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "big.yml", "-i", "inv.yml", "-v"],
                            cwd=project, env=_env(db), stdout=w, stderr=subprocess.DEVNULL)
    os.close(w)
    time.sleep(reader_sleeps)
    out = b""
    while chunk := os.read(r, 1 << 16):
        out += chunk
    os.close(r)
    return proc.wait(timeout=120), out


def test_a_slow_reader_of_a_nonblocking_output_never_stops_the_run(project: Path, tmp_path: Path) -> None:
    """stdout non-blocking and its reader slow for a moment: a full pipe raised EAGAIN, which
    stopped the run (exit 250) between stopping the old job and starting the new one. Now the
    write waits for room, and all the output arrives."""
    db, marker = tmp_path / "h.db", tmp_path / "started"
    write_yaml(project / "big.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "stop old (much output)", "command": "python3 -c 'print(\"x\" * 200000)'"},
        {"name": "start new", "copy": {"content": "x", "dest": str(marker)}}]}])
    rc, out = _nonblocking_run(project, db, reader_sleeps=2)
    assert rc == 0 and marker.read_text() == "x", out[-500:]
    assert out.count(b"x" * 200000) == 1 and out.rstrip().endswith(b"ignored=0"), out[-500:]
    [row] = _history(project, db)
    assert row["exit_code"] == 0 and not row["notes"], row


def _sighup_default() -> None:
    """In the child: SIGHUP as systemd starts a unit with it (the suite may run under nohup,
    whose ignored SIGHUP a child inherits, and a run keeps it ignored)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_a_sighup_with_no_terminal_is_recorded(project: Path, tmp_path: Path) -> None:
    """`systemctl kill -s HUP` on a run with no terminal: it went on, and nothing said a
    SIGHUP came. Now its record says so."""
    db, marker, log = tmp_path / "h.db", tmp_path / "started", tmp_path / "out.log"
    write_yaml(project / "hup.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "stop old", "command": "sleep 2"},
        {"name": "start new", "copy": {"content": "x", "dest": str(marker)}}]}])
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "opsrunner", "play", "hup.yml", "-i", "inv.yml"], cwd=project,
                                env=_env(db), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_sighup_default)
        deadline = time.monotonic() + 60
        while b"TASK [stop old]" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 0, log.read_text()
    assert marker.read_text() == "x"
    [row] = _history(project, db)
    assert any(re.fullmatch(rf"SIGHUP received at {TIME} and ignored \(no terminal to drop output to\): the run "
                            r"went on to its end", str(n)) for n in row["notes"]), row  # type: ignore[attr-defined]
