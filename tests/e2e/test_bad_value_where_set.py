"""A bad value that a task reads through one variable (`grace: "{{ kill_grace }}"`) is told where
the variable was set - the inventory (YAML or INI, host or group vars), a host_vars/ or
group_vars/ file, role defaults or vars, play vars, -e - with the key, and still names the task
that uses it. Exit 4, nothing run on any host: the first task of each play would leave a mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli

#: The role's task file: a mark (the first change on a host), then the use of the variable.
ROLE_TASKS = """\
- name: first change on the host
  shell: touch {marks}/{{{{ inventory_hostname }}}}
- name: stop the old run
  kill_old:
    pattern: "opsrunner-test-nothing-matches-this"
    grace: "{{{{ kill_grace }}}}"
"""
USE = "roles/trainer/tasks/main.yml:6:5"  # where the role uses it, as the message names it
INVENTORY = """\
all:
  vars:
    connection: local
  children:
    gpus:
      hosts:
        gpu1: {}
        gpu2: {}
"""


def _project(tmp_path: Path) -> Path:
    """A project: a role that uses kill_grace, a playbook that plays it, two local hosts."""
    project = tmp_path / "proj"
    (project / "marks").mkdir(parents=True)
    write_yaml(project / "roles" / "trainer" / "tasks" / "main.yml", ROLE_TASKS.format(marks=project / "marks"))
    write_yaml(project / "roles" / "trainer" / "defaults" / "main.yml", "kill_grace: 10\n")
    write_yaml(project / "site.yml", "- hosts: all\n  roles: [trainer]\n")
    write_yaml(project / "inventory" / "hosts.yml", INVENTORY)
    return project


def _refused(project: Path, *args: str, playbook: str = "site.yml", inventory: str = "inventory/hosts.yml") -> str:
    """`check` and `play`: exit 4, the same errors, no host touched; the errors."""
    checked = cli("check", playbook, "-i", inventory, *args, cwd=project)
    assert checked.rc == 4, checked.out + checked.err
    res = cli("play", playbook, "-i", inventory, *args, cwd=project)
    assert res.rc == 4, res.out + res.err
    assert res.out == "" and "nothing was run" in res.err, res.out + res.err
    assert list((project / "marks").iterdir()) == []
    assert res.err == checked.err
    return res.err


def _where_used(project: Path) -> str:
    return f"; used by kill_old.grace at {project / USE}"


@pytest.mark.parametrize("where,files,pos", [
    ("inventory host var", {"inventory/hosts.yml": INVENTORY.replace("gpu1: {}", "gpu1: {kill_grace: soon}")
                                                           .replace("gpu2: {}", "gpu2: {kill_grace: soon}")},
     None),
    ("inventory group var", {"inventory/hosts.yml": INVENTORY + "      vars:\n        kill_grace: soon\n"},
     "inventory/hosts.yml:10:9"),
    ("group_vars file", {"inventory/group_vars/gpus.yml": "# the GPU hosts\nkill_grace: soon\n"},
     "{project}/inventory/group_vars/gpus.yml:2:1"),
    ("role defaults", {"roles/trainer/defaults/main.yml": "other: 1\nkill_grace: soon\n"},
     "{project}/roles/trainer/defaults/main.yml:2:1"),
    ("role vars", {"roles/trainer/vars/main.yml": "\n\nkill_grace: soon\n"},
     "{project}/roles/trainer/vars/main.yml:3:1"),
    ("play vars", {"site.yml": "- hosts: all\n  vars:\n    kill_grace: soon\n  roles: [trainer]\n"},
     "site.yml:3:5"),
])
def test_a_bad_value_is_told_where_it_was_set(tmp_path: Path, where: str, files: dict[str, str],
                                              pos: str | None) -> None:
    project = _project(tmp_path)
    for name, text in files.items():
        write_yaml(project / name, text)
    err = _refused(project)
    problem = "kill_old argument 'grace': 'soon' is not a number (from {{ kill_grace }})"
    tail = f"{_where_used(project)} (at kill_grace)"
    if pos is None:  # each host sets it on its own line: one mistake (exit 4), told at both
        assert f"ERROR: inventory/hosts.yml:7:16: on host gpu1: {problem}{tail}" in err, err
        assert f"ERROR: inventory/hosts.yml:8:16: on host gpu2: {problem}{tail}" in err, err
    else:
        assert err.splitlines()[0] == f"ERROR: {pos.format(project=project)}: {problem}{tail}", err


def test_each_host_s_own_host_vars_file_is_told(tmp_path: Path) -> None:
    project = _project(tmp_path)
    write_yaml(project / "inventory" / "host_vars" / "gpu1.yml", "kill_grace: soon\n")
    write_yaml(project / "inventory" / "host_vars" / "gpu2.yml", "# gpu2\nkill_grace: soon\n")
    err = _refused(project)
    for host, line in (("gpu1", 1), ("gpu2", 2)):
        assert (f"ERROR: {project}/inventory/host_vars/{host}.yml:{line}:1: on host {host}: kill_old argument "
                f"'grace': 'soon' is not a number (from {{{{ kill_grace }}}}){_where_used(project)} "
                "(at kill_grace)") in err, err


def test_an_ini_inventory_s_host_and_group_vars_are_told_at_their_lines(tmp_path: Path) -> None:
    project = _project(tmp_path)
    write_yaml(project / "hosts.ini", "[gpus]\ngpu1 connection=local kill_grace=-1\n\n[gpus:vars]\n"
                                      "connection=local\nkill_grace=-1\n[other]\ngpu2 connection=local\n"
                                      "[other:vars]\nkill_grace=-1\n")
    err = _refused(project, inventory="hosts.ini")
    for line, host in ((2, "gpu1"), (10, "gpu2")):
        assert (f"ERROR: hosts.ini:{line}:1: on host {host}: -1 is less than the minimum of 0 "
                f"(from {{{{ kill_grace }}}}){_where_used(project)} (at kill_grace)") in err, err


@pytest.mark.parametrize("args,pos", [
    (("-e", "kill_grace=soon"), "-e kill_grace=soon"),
    (("-e", "@extra.yml"), "-e @extra.yml:2:1"),
    (("-e", "other=1 kill_grace=soon"), "-e kill_grace=soon"),
])
def test_a_bad_e_value_names_the_e_that_gave_it(tmp_path: Path, args: tuple[str, ...], pos: str) -> None:
    project = _project(tmp_path)
    write_yaml(project / "extra.yml", "other: 1\nkill_grace: soon\n")
    err = _refused(project, *args)
    assert err.splitlines()[0] == (f"ERROR: {pos}: kill_old argument 'grace': 'soon' is not a number "
                                   f"(from {{{{ kill_grace }}}}){_where_used(project)} (at kill_grace)"), err


def test_a_plain_task_s_value_through_a_chain_of_variables_is_told_where_its_value_is_written(
        tmp_path: Path) -> None:
    project = _project(tmp_path)
    write_yaml(project / "plain.yml", f"""\
- hosts: all
  vars:
    kill_grace: "{{{{ grace_seconds }}}}"
    cache_paths: [/tmp/ok, relative/path]
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
      timeout: "{{{{ stop_timeout }}}}"
    - kill_old:
        pattern: nothing-matches-this
        grace: "{{{{ kill_grace }}}}"
    - clear_cache:
        paths: "{{{{ cache_paths }}}}"
""")
    write_yaml(project / "inventory" / "group_vars" / "all.yml", "grace_seconds: soon\nstop_timeout: -5\n")
    err = _refused(project, playbook="plain.yml")
    vars_file = f"{project}/inventory/group_vars/all.yml"
    assert (f"ERROR: {vars_file}:1:1: kill_old argument 'grace': 'soon' is not a number "
            "(from {{ kill_grace }} -> {{ grace_seconds }}); used by kill_old.grace at plain.yml:10:9 "
            "(at grace_seconds)") in err, err
    assert (f"ERROR: {vars_file}:2:1: timeout must be a positive number of seconds, got -5 "
            "(from {{ stop_timeout }}); used by timeout at plain.yml:7:7 (at stop_timeout)") in err, err
    assert ("ERROR: plain.yml:4:28: 'relative/path' is not an absolute path: clear_cache refuses it on every host "
            "(rule relative) (from {{ cache_paths }}); used by clear_cache.paths[1] at plain.yml:12:9 "
            "(at cache_paths[1])") in err, err


def test_a_computed_value_is_still_told_at_the_task(tmp_path: Path) -> None:
    """A value a template computes has no line that wrote it: told where it is used, as before."""
    project = _project(tmp_path)
    write_yaml(project / "inventory" / "group_vars" / "all.yml", "kill_grace: \"{{ 'so' ~ 'on' }}\"\n")
    err = _refused(project)
    assert err.splitlines()[0] == (f"ERROR: {project / USE}: kill_old argument 'grace': 'soon' is not a number "
                                   "(from {{ kill_grace }}) (at kill_old.grace)"), err


def test_a_host_that_alone_sets_a_bad_value_fails_told_where_it_set_it(tmp_path: Path) -> None:
    """Only gpu1 is wrong: gpu2 runs; gpu1 fails in preflight, untouched, told at its host_vars file."""
    project = _project(tmp_path)
    write_yaml(project / "inventory" / "host_vars" / "gpu1.yml", "kill_grace: soon\n")
    res = cli("play", "site.yml", "-i", "inventory/hosts.yml", cwd=project)
    assert res.rc == 2, res.out + res.err
    assert sorted(p.name for p in (project / "marks").iterdir()) == ["gpu2"]
    assert (f"  {project}/inventory/host_vars/gpu1.yml:1:1: kill_old argument 'grace': 'soon' is not a number "
            f"(from {{{{ kill_grace }}}}){_where_used(project)} (at kill_grace)") in res.out, res.out
