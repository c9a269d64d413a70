"""Values that every host refuses are bad input, told before the run at their file, line and
key, exit 4: an empty `log` (verify dropped its log checks, launch_detached sent the output
to /dev/null), a blank launch command or program (the restart stopped the job, then
"launched" `sh -c ' '`, which exits 0), and clear_cache paths no host accepts ('', relative,
/: the restart stopped the job before clear_cache refused them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_ns import AGENT
from tests.conftest import ROOT, write_yaml
from tests.helpers import cli

ROLE_TASKS = ROOT / "roles" / "training_restart" / "tasks" / "main.yml"


def _lines_of(path: Path, text: str) -> list[int]:
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]


def _refused_by_the_role(home: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> str:
    """`check` and `play` of the restart with -e EXTRA: exit 4, nothing run; the errors."""
    monkeypatch.setenv("HOME", str(home))
    checked = cli("check", "restart_training.yml", *extra, cwd=ROOT)
    assert checked.rc == 4, checked.out + checked.err
    res = cli("play", "restart_training.yml", *extra, cwd=ROOT)
    assert res.rc == 4, res.out + res.err
    assert res.out == "" and "nothing was run" in res.err  # no play started, no task ran
    assert not (home / "opsrunner-demo").exists()  # deploy (the first task) never ran: nor kill_old
    assert res.err == checked.err
    return res.err


def test_an_empty_log_path_is_refused_where_the_role_launches_and_verifies(home: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    err = _refused_by_the_role(home, monkeypatch, "-e", "log_path=")
    check, launch, verify = _lines_of(ROLE_TASKS, 'log: "{{ log_path }}"')
    for line in (check, launch):  # the check before the stop, and the launch
        assert ("ERROR: -e log_path=: '' should be non-empty (from {{ log_path }}); "
                f"used by launch_detached.log at {ROLE_TASKS}:{line}:9 (at log_path)") in err, err
    assert ("ERROR: -e log_path=: '' should be non-empty (from {{ log_path }}); "
            f"used by verify.log at {ROLE_TASKS}:{verify}:9 (at log_path)") in err, err


def test_a_blank_train_command_is_refused_before_the_old_job_is_stopped(home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    err = _refused_by_the_role(home, monkeypatch, "-e", "train_command=")
    lines = _lines_of(ROLE_TASKS, "command: \"{{ train_command }}")
    assert len(lines) == 2  # the check before the stop, and the launch
    assert err.splitlines()[:2] == [f"ERROR: {ROLE_TASKS}:{line}:9: ' ' is blank: there is no program to run "
                                    "(from {{ train_command }} {{ train_extra_args }}) (at launch_detached.command)"
                                    for line in lines]


def test_cache_paths_no_host_accepts_are_refused_before_the_old_job_is_stopped(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (line,) = _lines_of(ROLE_TASKS, 'paths: "{{ cache_paths }}"')
    used = f"{ROLE_TASKS}:{line}:9"
    err = _refused_by_the_role(home, monkeypatch, "-e", "cache_paths=")
    assert err.splitlines()[0] == ("ERROR: -e cache_paths=: '' is an empty path: clear_cache refuses it on every "
                                   "host (rule empty) (from {{ cache_paths }}); used by clear_cache.paths at "
                                   f"{used} (at cache_paths)")
    err = _refused_by_the_role(home, monkeypatch, "-e",
                               '{"cache_paths": ["/tmp/ok", " ", "cache/rel", "/", "//./.."]}')
    # Each told at its item in the -e value (its column), then where the role uses it.
    assert err.splitlines()[:4] == [
        f"ERROR: <-e>:1:{col}: {shown} clear_cache refuses it on every host (rule {rule}) "
        f"(from {{{{ cache_paths }}}}); used by clear_cache.paths[{i}] at {used} (at cache_paths[{i}])"
        for i, col, shown, rule in ((1, 29, "' ' is an empty path:", "empty"),
                                    (2, 34, "'cache/rel' is not an absolute path:", "relative"),
                                    (3, 47, "'/' is the filesystem root:", "root"),
                                    (4, 52, "'//./..' is the filesystem root:", "root"))]
    assert "4 error(s)" in err


def test_cache_paths_that_need_the_host_are_left_to_it(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    res = cli("check", "restart_training.yml", "-e",
              '{"cache_paths": ["~/.cache/x", "$HOME/y", "/tmp/torch_$USER", "/tmp/a/../.."]}', cwd=ROOT)
    assert res.rc == 0, res.err


@pytest.mark.parametrize("task,key,message", [
    ({"command": " ", "pidfile": "{w}/j.pid"}, "command", "' ' is blank: there is no program to run"),
    ({"argv": [""], "pidfile": "{w}/j.pid"}, "argv[0]", "the program '' is blank: there is no program to run"),
    ({"argv": ["  ", "x"]}, "argv[0]", "the program '  ' is blank: there is no program to run"),
    ({"command": "sleep 1", "log": ""}, "log", "'' should be non-empty"),
])
def test_launch_detached_without_a_program_or_with_an_empty_log_is_bad_input(
        tmp_path: Path, task: dict[str, object], key: str, message: str) -> None:
    marker = tmp_path / "touched"
    args = {k: v.format(w=tmp_path) if isinstance(v, str) else v for k, v in task.items()}
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "localhost", "tasks": [
        {"shell": f"touch {marker}"}, {"launch_detached": args}]}])
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb}:" in res.err and f"{message} (at " in res.err and f"launch_detached.{key})" in res.err
    assert not marker.exists()  # the task before it never ran
    assert not (tmp_path / "j.pid").exists()


def test_verify_with_an_empty_log_is_bad_input(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "localhost", "tasks": [{"verify": {
        "pidfile": str(tmp_path / "q.pid"), "log": "", "log_regex": "ready", "log_min_bytes": 100,
        "log_grows": 2, "log_not_regex": "Traceback"}}]}])
    res = cli("play", str(pb), cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb}:" in res.err and "'' should be non-empty (at " in res.err and "verify.log)" in res.err
    assert "all checks passed" not in res.out


def test_rollbacks_verify_with_an_empty_log_is_bad_input(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    res = cli("check", "rollback.yml", "-e", "log_path=", cwd=ROOT)
    assert res.rc == 4, res.out + res.err
    assert "verify log '' should be non-empty: an empty log would skip every log check (at rollback)" in res.err


def test_a_path_known_only_at_run_time_is_still_refused_before_anything_is_removed(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "localhost", "tasks": [
        {"set_fact": {"where": "/"}}, {"name": "clear", "clear_cache": {"paths": ["{{ where }}"]}}]}])
    res = cli("play", str(pb), "--check", cwd=tmp_path)  # --check: a bug here can never remove anything
    assert res.rc == 2, res.out + res.err
    assert "'/' is the filesystem root: clear_cache refuses it on every host (rule root)" in res.out


def test_the_agent_still_refuses_them(tmp_path: Path) -> None:
    """The second line of defence, for paths only the host expands ($VAR, ~)."""
    reply = AGENT["dispatch"]({"op": "clear", "args": {"paths": ["", "/", "cache/rel"], "max_matches": 20,
                                                       "check_mode": True}})
    assert reply["refused"] == ["empty", "root", "relative"], reply
