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
from tests.helpers import CliResult, ProjectEnv

TOUCH = {"name": "touch", "command": "touch {{ out }}/{{ inventory_hostname }}"}


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    local = {"connection": "local"}
    hosts = {"h1": local, "h2": local}
    write_yaml(e.project / "inv.yml", {"all": {"hosts": hosts, "vars": {"out": str(e.root / "out")}}})
    (e.root / "out").mkdir()
    return e


def touched(env: ProjectEnv) -> list[str]:
    return sorted(p.name for p in (env.root / "out").iterdir())


def play(env: ProjectEnv, name: str, *args: str) -> CliResult:
    return env.run("play", name, "-i", "inv.yml", *args)


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
