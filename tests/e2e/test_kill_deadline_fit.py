"""kill_old under a deadline no longer than its grace: its SIGKILL would come past the deadline,
so preflight refuses it (exit 4, at the timeout, naming both values) before any host is
touched, when both are known before the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _playbook(tmp_path: Path, kill: str, play: str = "") -> tuple[Path, Path]:
    marker = tmp_path / "first-task-ran"
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: localhost
{play}  tasks:
    - name: first change
      shell: touch {marker}
    - name: stop
      kill_old:
        pattern: never-matches-{tmp_path.name}
{kill}""")
    return pb, marker


@pytest.mark.parametrize("kill,args,told", [
    ("        grace: 30\n      timeout: 5\n", (), "timeout (5 s) is not longer than its grace (30 s)"),
    ("        grace: 20\n      timeout: 20\n", (), "timeout (20 s) is not longer than its grace (20 s)"),
    ("      timeout: 4\n", (), "timeout (4 s) is not longer than its grace (10 s, the default)"),
    ('        grace: "{{ g }}"\n      timeout: "{{ t }}"\n', ("-e", "g=45", "-e", "t=40"),
     "timeout (40 s) is not longer than its grace (45 s)"),
], ids=["shorter", "equal", "default-grace", "from-e"])
def test_timeout_not_longer_than_grace_is_refused_at_the_timeout(tmp_path: Path, kill: str, args: tuple[str, ...],
                                                                told: str) -> None:
    pb, marker = _playbook(tmp_path, kill)
    for command in ("play", "check"):
        res = cli(command, str(pb), *args, cwd=tmp_path)
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: {pb}:{_line_of(pb, 'timeout:')}:7: kill_old: {told}: the SIGKILL after the grace " \
               "would come past the deadline" in res.err, res.err
        assert res.err.endswith("(at timeout)\n1 error(s); nothing was run.\n"), res.err
        assert not marker.exists()  # no task ran


def test_play_timeout_not_longer_than_grace_is_refused_at_the_grace(tmp_path: Path) -> None:
    pb, marker = _playbook(tmp_path, "        grace: 8\n", play="  timeout: 6\n")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert f"{pb}:{_line_of(pb, 'grace:')}:9: kill_old: the play's timeout (6 s), which this task runs under, " \
           "is not longer than its grace (8 s)" in res.err, res.err
    assert "give the task its own timeout, longer than the grace (at kill_old.grace)" in res.err
    assert not marker.exists()
    # The task's own timeout wins over the play's: then it fits.
    pb, marker = _playbook(tmp_path, "        grace: 8\n      timeout: 9\n", play="  timeout: 6\n")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    assert marker.exists()


def test_a_deadline_longer_than_grace_or_a_grace_known_only_at_run_time_runs(tmp_path: Path) -> None:
    pb, marker = _playbook(tmp_path, "        grace: 30\n      timeout: 31\n")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
    assert "ok: [localhost] => no old process found" in res.out
    marker.unlink()
    # A grace from a registered result is not known before the run: nothing to compare yet.
    pb = write_yaml(tmp_path / "late.yml", f"""
- hosts: localhost
  tasks:
    - shell: echo 30
      register: out
    - kill_old:
        pattern: never-matches-{tmp_path.name}
        grace: "{{{{ out.stdout }}}}"
      timeout: 5
""")
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 0, res.out + res.err
