"""The library entry point, opsrunner.run(PlayRequest): what the CLI and scheduled runs call,
used here as a library user would, in this process, over the local connection."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import opsrunner
from opsrunner import api
from opsrunner.errors import ValidationError
from opsrunner.events import Event, Recap, TaskEnd
from opsrunner.history.store import HistoryStore
from opsrunner.locks.run_lock import RunLockedError, acquire_run_lock
from opsrunner.results import Status
from opsrunner.targets import NoHostsToTarget
from tests.conftest import ROOT, pids_with, write_yaml
from tests.helpers import cli_subprocess


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    write_yaml(tmp_path / "inv.yml", {"all": {"hosts": {"a": {"connection": "local"}, "b": {"connection": "local"}}}})
    write_yaml(tmp_path / "site.yml", [{"name": "Site", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Touch", "command": f"touch {tmp_path}/{{{{ inventory_hostname }}}}.{{{{ tag }}}}"},
        {"name": "Fail on b", "fail": {"msg": "b is broken"}, "when": "inventory_hostname == 'b'"},
    ]}])
    return tmp_path


def test_run_returns_a_typed_result_and_hands_every_event_to_the_callback(project: Path) -> None:
    seen: list[Event] = []
    result = opsrunner.run(opsrunner.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=x"],
                                                 history_path=str(project / "h.db")), on_event=seen.append)
    assert (project / "a.x").exists() and (project / "b.x").exists()  # the tasks really ran
    assert result.exit_code == 2  # b failed
    assert result.summary.stats["a"].failed == 0 and result.summary.stats["b"].failed == 1
    ends = [(e.host, e.task, e.result.status) for e in seen if isinstance(e, TaskEnd)]
    assert ("b", "Fail on b", Status.FAILED) in ends and ("a", "Fail on b", Status.SKIPPED) in ends
    assert isinstance(seen[-1], Recap) and seen[-1].summary is result.summary
    store = HistoryStore(project / "h.db")
    run = store.run(result.run_id or "")
    store.close()
    assert run is not None and run.exit_code == 2 and run.extra_vars == {"tag": "x"}
    assert run.command == "opsrunner play site.yml -i inv.yml -e tag=x"


def test_library_variables_win_over_extra_vars_and_history_can_be_off(project: Path) -> None:
    result = api.run(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=x"],
                                     variables={"tag": "y"}, limit="a", history=False))
    assert result.exit_code == 0 and result.run_id is None
    assert (project / "a.y").exists() and not (project / "a.x").exists() and not (project / "b.y").exists()


def test_check_mode_through_the_library_changes_nothing(project: Path) -> None:
    result = api.run(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=c"], check=True,
                                     history=False))
    assert result.exit_code == 2 and not list(project.glob("*.c"))


def test_bad_input_raises_every_problem_with_its_place_and_touches_nothing(project: Path) -> None:
    (project / "bad.yml").write_text("- hosts: all\n  tasks:\n    - shel: {cmd: 'touch bad'}\n")
    with pytest.raises(ValidationError) as caught:
        api.run(api.PlayRequest("bad.yml", inventory=["inv.yml"], extra_vars=["nokey"],
                                history_path=str(project / "h.db")))
    text = [str(p) for p in caught.value.problems]
    assert any(t.startswith("bad.yml:3:7: ") and "'shel'" in t for t in text), text
    assert any("expected key=value" in t for t in text), text
    assert not (project / "bad").exists()  # no host touched
    store = HistoryStore(project / "h.db")  # and the run is recorded as what it was: bad input
    [run] = store.runs(limit=5)
    store.close()
    assert run.exit_code == 4 and run.ended is not None and not run.tasks


def test_a_run_that_preflight_refuses_is_recorded_as_bad_input(project: Path) -> None:
    write_yaml(project / "pre.yml", [{"hosts": "all", "gather_facts": False,
                                      "tasks": [{"command": "true", "timeout": "{{ nope }}"}]}])
    with pytest.raises(ValidationError):
        api.run(api.PlayRequest("pre.yml", inventory=["inv.yml"], history_path=str(project / "h.db")))
    store = HistoryStore(project / "h.db")
    [run] = store.runs(limit=5)
    store.close()
    assert run.exit_code == 4 and run.ended is not None  # closed, not left `running`


def test_no_hosts_and_a_held_run_lock_are_errors_before_anything_runs(project: Path) -> None:
    with pytest.raises(NoHostsToTarget):
        api.run(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=z"], limit="nosuch",
                                history=False))
    held = acquire_run_lock(Path("site.yml"), ["inv.yml"])
    try:
        with pytest.raises(RunLockedError) as caught:
            api.run(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=z"], run_lock=True,
                                    history=False))
        assert "locked by" in str(caught.value)
    finally:
        held.release()
    assert not list(project.glob("*.z"))
    assert api.run(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=z"], run_lock=True,
                                   limit="a", history=False)).exit_code == 0


def test_check_reports_preflight_and_the_cli_says_the_same(project: Path) -> None:
    inputs, report = api.check(api.PlayRequest("site.yml", inventory=["inv.yml"], extra_vars=["tag=x"]))
    assert sorted(report.hosts) == ["a", "b"] and inputs.options.extra_vars == {"tag": "x"}
    from tests.helpers import cli

    res = cli("check", "site.yml", "-i", "inv.yml", "-e", "tag=x", cwd=project)
    assert res.rc == 0 and "preflight passed on 2" in res.out
    res = cli("play", "site.yml", "-i", "inv.yml", "-e", "tag=x", "--json-events", "-", "--no-history",
              cwd=project)
    recap = json.loads(res.out.splitlines()[-1])
    assert res.rc == 2 and recap["event"] == "recap" and recap["hosts"]["b"]["failed"] == 1


def test_the_docs_library_example_runs_as_written(home: Path) -> None:
    """docs/development.md's "opsrunner as a library" block, run as a user would from a checkout."""
    text = (ROOT / "docs" / "development.md").read_text()
    section = text.split("## opsrunner as a library", 1)[1]
    [code] = re.findall(r"```python\n(.*?)\n```", section, re.S)[:1]
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "PlayStart" and "TaskEnd" in lines and lines[-2] == "Recap"
        exit_code, run_id, failed = lines[-1].split()
        assert (exit_code, failed) == ("0", "0") and re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{8}", run_id)
        assert pids_with(f"{home}/opsrunner-demo/code/train.py")  # the job it launched runs
    finally:
        stop = cli_subprocess("play", "stop_training.yml", env={"HOME": str(home)})
        assert stop.rc == 0, stop.out + stop.err
    assert pids_with(f"{home}/opsrunner-demo/code/train.py") == []


def test_the_library_errors_are_importable_from_the_package() -> None:
    assert opsrunner.ValidationError is ValidationError and opsrunner.NoHostsToTarget is NoHostsToTarget
    assert opsrunner.RunLockedError is RunLockedError and issubclass(RunLockedError, opsrunner.OpsrunnerError)


def test_a_library_run_records_the_become_and_connection_options_it_was_given() -> None:
    # What history records of a library call (no argv): the equivalent command line, with the
    # become defaults too (never the password: only that one was given, as -K would).
    from opsrunner.becomeopts import BecomeDefaults

    request = api.PlayRequest("site.yml", inventory=["inv.yml"], user="deploy", connection="ssh",
                              become=BecomeDefaults(True, "trainer", "su", password="s3cret-pw"),
                              host_slice="2/4", run_group="nightly")
    line = request.command_line()
    assert line == ["play", "site.yml", "-i", "inv.yml", "--user=deploy", "--connection=ssh", "--become",
                    "--ask-become-pass", "--become-user=trainer", "--become-method=su", "--slice", "2/4",
                    "--run-group", "nightly"]
    assert "s3cret-pw" not in " ".join(line)
