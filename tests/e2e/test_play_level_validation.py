"""Play-level input known before the run is checked before any host is touched: a `serial`
rendered from -e or play vars that cannot split the hosts, and an include_vars file that is
missing or broken, are bad input (exit 4, file:line and the key) from `play`, `check` and
`schedule add` alike. A --limit term that matches no host is warned about, as ansible-core
does, and the run goes on. Every host is a local one in the test's tmp dir; a host that ran
anything leaves a file named after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.e2e.localhosts import local_project, play, touched
from tests.helpers import ProjectEnv

TOUCH = {"name": "touch", "command": "touch {{ out }}/{{ inventory_hostname }}"}


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    return local_project(tmp_path)


def serial_playbook(env: ProjectEnv) -> Path:
    return write_yaml(env.project / "serial.yml", [
        {"name": "rolling", "hosts": "all", "serial": "{{ serial | default(0) }}", "tasks": [TOUCH]}])


def test_a_serial_from_e_that_is_no_size_is_bad_input_before_any_host(env: ProjectEnv) -> None:
    pb = serial_playbook(env)
    where = f"ERROR: {pb.name}:3:3: bad serial '{{{{ serial | default(0) }}}}': 'abc' is not a number of hosts"
    res = play(env, "serial.yml", "-e", "serial=abc")
    assert res.rc == 4, res.out + res.err
    assert where in res.err and "(at serial)" in res.err, res.err
    assert touched(env) == [] and "PLAY [" not in res.out
    newest = env.history()[0]
    assert newest["exit_code"] == 4 and "bad serial" in newest["reason"], newest
    checked = env.run("check", "serial.yml", "-i", "inv.yml", "-e", "serial=abc")
    assert checked.rc == 4 and where in checked.err, checked.out + checked.err
    added = env.run("schedule", "add", "serialbad", "serial.yml", "-i", "inv.yml", "-e", "serial=abc",
                    "--every", "1h")
    assert added.rc == 4 and where in added.err and "schedule 'serialbad' not added" in added.err, added.err
    assert not (env.root / "schedules").exists() and not (env.root / "units").exists()


@pytest.mark.parametrize(("extra", "why"), [
    ('{"serial": [1, "x%"]}', "'x%' is not a number of hosts"),
    ('{"serial": {"a": 1}}', "is not a number of hosts"),
])
def test_other_serials_that_cannot_split_the_hosts_are_bad_input(env: ProjectEnv, extra: str, why: str) -> None:
    serial_playbook(env)
    res = play(env, "serial.yml", "-e", extra)
    assert res.rc == 4 and why in res.err and "(at serial)" in res.err, res.out + res.err
    assert touched(env) == []


def test_a_serial_naming_an_undefined_variable_is_bad_input(env: ProjectEnv) -> None:
    pb = write_yaml(env.project / "serial.yml", [{"hosts": "all", "serial": "{{ batch_size }}", "tasks": [TOUCH]}])
    for command in ("play", "check"):
        res = env.run(command, "serial.yml", "-i", "inv.yml")
        assert res.rc == 4, res.out + res.err
        assert f"ERROR: {pb.name}:2:3: bad serial" in res.err and "'batch_size' is undefined" in res.err, res.err
    assert touched(env) == []


def test_a_good_serial_from_e_still_runs_in_batches(env: ProjectEnv) -> None:
    serial_playbook(env)
    res = play(env, "serial.yml", "-e", "serial=50%")
    assert res.rc == 0, res.out + res.err
    assert res.out.count("TASK [touch]") == 2 and touched(env) == ["h1", "h2"]


def include_vars_playbook(env: ProjectEnv, file: str) -> Path:
    return write_yaml(env.project / "iv.yml", [{"hosts": "all", "tasks": [TOUCH, {"include_vars": file}]}])


def test_a_missing_include_vars_file_is_bad_input_before_any_host(env: ProjectEnv) -> None:
    missing = env.root / "nope.yml"
    pb = include_vars_playbook(env, str(missing))
    for command in ("play", "check"):
        res = env.run(command, "iv.yml", "-i", "inv.yml")
        assert res.rc == 4, res.out + res.err
        assert (f"ERROR: {pb.name}:5:5: include_vars file '{missing}' not found "
                "(at [0].tasks[1].include_vars.file)") in res.err, res.err
    assert touched(env) == []


def test_a_broken_include_vars_file_is_bad_input_at_its_line(env: ProjectEnv) -> None:
    (env.project / "brokenvars.yml").write_text("a: 1\n  b: [\n")
    pb = include_vars_playbook(env, "brokenvars.yml")
    res = play(env, "iv.yml")
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {env.project / 'brokenvars.yml'}:2:" in res.err and "YAML syntax error" in res.err, res.err
    assert f"(in the include_vars file at {pb.name}:5:5)" in res.err, res.err
    (env.project / "listvars.yml").write_text("- 1\n")
    include_vars_playbook(env, "listvars.yml")
    res = play(env, "iv.yml")
    assert res.rc == 4 and "listvars.yml must hold a mapping of variables" in res.err, res.err
    assert touched(env) == []


def test_an_include_vars_file_named_from_e_is_checked_before_any_host(env: ProjectEnv) -> None:
    pb = include_vars_playbook(env, "{{ vf }}.yml")
    res = play(env, "iv.yml", "-e", "vf=nope")
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: {pb.name}:5:5: include_vars file 'nope.yml' not found" in res.err, res.err
    assert touched(env) == []
    (env.project / "good.yml").write_text("x: 1\n")
    assert play(env, "iv.yml", "-e", "vf=good").rc == 0 and touched(env) == ["h1", "h2"]


def test_an_include_vars_file_named_from_a_registered_result_is_read_at_run_time(env: ProjectEnv) -> None:
    write_yaml(env.project / "iv.yml", [{"hosts": "all", "tasks": [
        {**TOUCH, "register": "r"}, {"include_vars": "{{ r.rc }}-vars.yml"}]}])
    res = play(env, "iv.yml")
    assert res.rc == 2, res.out + res.err
    assert "include_vars: 0-vars.yml not found" in res.out and touched(env) == ["h1", "h2"]


def test_a_limit_term_that_matches_no_host_is_warned_about_and_ignored(env: ProjectEnv) -> None:
    write_yaml(env.project / "two.yml", [{"hosts": "all", "tasks": [TOUCH]}, {"hosts": "all", "tasks": [TOUCH]}])
    res = play(env, "two.yml", "-l", "h1:nosuch")
    assert res.rc == 0, res.out + res.err
    warning = "[WARNING]: Could not match supplied host pattern, ignoring: nosuch"
    assert res.err.count(warning) == 1, res.err  # once per run, not once per play
    assert touched(env) == ["h1"]
    none = play(env, "two.yml", "-l", "nosuch")
    assert none.rc == 1 and "--limit 'nosuch' leave no hosts to target" in none.err, none.err


def test_a_pattern_that_leaves_no_host_is_said_in_english(env: ProjectEnv) -> None:
    write_yaml(env.project / "one.yml", [{"hosts": "trainers", "tasks": [TOUCH]}])
    res = play(env, "one.yml")
    assert res.rc == 1 and "host pattern 'trainers' leaves no hosts to target" in res.err, res.err
    write_yaml(env.project / "two.yml", [{"hosts": "trainers", "tasks": [TOUCH]}, {"hosts": "gpus", "tasks": [TOUCH]}])
    res = play(env, "two.yml")
    assert res.rc == 1 and "host patterns 'gpus, trainers' leave no hosts to target" in res.err, res.err
