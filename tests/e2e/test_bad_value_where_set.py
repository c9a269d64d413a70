"""A bad value that a task reads through one variable (`grace: "{{ kill_grace }}"`) is told where
the variable was set - the inventory (YAML or INI, host or group vars), a host_vars/ or
group_vars/ file, role defaults or vars, play vars, -e - with the key, and still names the task
that uses it. Exit 4, nothing run on any host: the first task of each play would leave a mark."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from opsrunner import api
from opsrunner.errors import ValidationError
from opsrunner.secrets import MASK
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


@pytest.mark.parametrize("layout", ["a task file imported twice", "a role played by two plays"])
def test_a_task_line_reached_twice_with_the_bad_value_is_one_mistake(tmp_path: Path, layout: str) -> None:
    """The second use sets the bad value for every host; gpu2 also sets it in its host_vars file
    for the first: every host fails the same task line the same way, so nothing runs (exit 4)
    under `play` as under `check`, each place that set the value told once."""
    project = _project(tmp_path)
    write_yaml(project / "inventory" / "host_vars" / "gpu2.yml", "kill_grace: soon\n")
    if layout == "a task file imported twice":
        write_yaml(project / "inventory" / "group_vars" / "all.yml", "kill_grace: 5\n")
        write_yaml(project / "stop.yml", "- name: stop the old run\n  kill_old:\n    pattern: nothing-matches-this\n"
                                         "    grace: \"{{ kill_grace }}\"\n")
        write_yaml(project / "site.yml", f"""\
- hosts: all
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - import_tasks: stop.yml
    - import_tasks: stop.yml
      vars:
        kill_grace: soon
""")
        second, use = "site.yml:7:9", "stop.yml:4:5"
    else:
        write_yaml(project / "site.yml", "- hosts: all\n  roles: [trainer]\n"
                                         "- hosts: all\n  vars:\n    kill_grace: soon\n  roles: [trainer]\n")
        second, use = "site.yml:5:5", str(project / USE)
    err = _refused(project)
    problem = "kill_old argument 'grace': 'soon' is not a number (from {{ kill_grace }})"
    tail = f"; used by kill_old.grace at {use} (at kill_grace)"
    assert err.splitlines() == [f"ERROR: {second}: {problem}{tail}",
                                f"ERROR: {project}/inventory/host_vars/gpu2.yml:1:1: on host gpu2: {problem}{tail}",
                                "2 error(s); nothing was run."], err


def test_a_no_log_task_s_value_from_a_variable_named_no_log_stays_hidden(tmp_path: Path) -> None:
    """Told where a variable was set, a problem's key is the variable's name: one named `no_log`
    is still a no_log task's argument problem, hidden as any other."""
    project = _project(tmp_path)
    value = "hidden-V6t3-not-a-number"  # no secret-like name: only no_log hides it
    write_yaml(project / "nolog.yml", f"""\
- hosts: all
  vars:
    no_log: {value}
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - kill_old:
        pattern: nothing-matches-this
        grace: "{{{{ no_log }}}}"
      no_log: true
""")
    err = _refused(project, playbook="nolog.yml")
    assert err.splitlines()[0] == ("ERROR: nolog.yml:8:9: a problem here; its details are hidden: no_log is set on "
                                   "this task (at kill_old.grace)"), err
    assert value not in err, err


def _history_bytes(db: Path) -> bytes:
    """Every byte of a history database and its journal files, as they are on disk."""
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    return b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))


def test_a_secret_named_e_value_is_hidden_where_it_is_told_however_short(tmp_path: Path) -> None:
    """`-e api_token=ab` names where the value was given as the command line is shown: the value
    of a secret-named variable hidden however short (too short to be masked by its value), when
    every host fails (exit 4) and when one does (its preflight failure, its events, its history)."""
    project = _project(tmp_path)
    write_yaml(project / "roles" / "trainer" / "tasks" / "main.yml",
               ROLE_TASKS.format(marks=project / "marks").replace("kill_grace", "api_token"))
    err = _refused(project, "-e", "api_token=ab")
    assert err.startswith("ERROR: -e api_token=********: kill_old argument 'grace': "), err
    assert "api_token=ab" not in err, err
    events, history = tmp_path / "events.jsonl", tmp_path / "history.db"
    res = cli("play", "site.yml", "-i", "inventory/hosts.yml", "-e", "api_token=ab", "--history", str(history),
              cwd=project)
    assert res.rc == 4 and res.err == err, res.out + res.err
    assert b"api_token=********: kill_old" in _history_bytes(history)  # why the run ended, as told
    assert b"api_token=ab" not in _history_bytes(history)
    # gpu1 alone uses it: gpu2 runs, gpu1 fails its preflight, told in the events and the history.
    write_yaml(project / "one.yml", f"""\
- hosts: all
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - kill_old:
        pattern: nothing-matches-this
        grace: "{{{{ api_token }}}}"
      when: inventory_hostname == 'gpu1'
""")
    for given in ("api_token=ab", "api_token='a b'"):
        res = cli("play", "one.yml", "-i", "inventory/hosts.yml", "-e", given, "--json-events", str(events),
                  "--history", str(history), cwd=project)
        assert res.rc == 2, res.out + res.err
        assert f"  -e {given.replace('ab', MASK).replace('a b', MASK)}: kill_old argument 'grace'" in res.out, res.out
        for where, text in (("the console", res.out + res.err), ("the events", events.read_text()),
                            ("the history", _history_bytes(history).decode(errors="replace"))):
            assert "api_token=ab" not in text and "api_token='a b'" not in text and "'a b'" not in text, where


def test_a_library_caller_s_problem_at_its_use_is_masked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ValidationError.problems: the problem told where the -e set the value, and the same problem
    at its use (`used`), which quotes the value too."""
    project = _project(tmp_path)
    write_yaml(project / "roles" / "trainer" / "tasks" / "main.yml",
               ROLE_TASKS.format(marks=project / "marks").replace("kill_grace", "api_token"))
    monkeypatch.chdir(project)
    for call in (api.check, api.run):
        with pytest.raises(ValidationError) as caught:
            call(api.PlayRequest("site.yml", inventory=["inventory/hosts.yml"], extra_vars=["api_token=tok-P4w9"],
                                 history=False))
        [problem] = caught.value.problems
        assert problem.used is not None and str(problem.used.pos) == str(project / USE), problem
        assert "tok-P4w9" not in repr(problem), problem


def test_a_newline_in_an_e_value_keeps_one_line_a_problem(tmp_path: Path) -> None:
    project = _project(tmp_path)
    err = _refused(project, "-e", 'kill_grace="so\nERROR: fake.yml:1:1: injected\non"')
    lines = err.splitlines()
    assert len(lines) == 2 and lines[1] == "1 error(s); nothing was run.", err
    assert lines[0].startswith("ERROR: -e kill_grace='so\\nERROR: fake.yml:1:1: injected\\non': kill_old "), err


def test_an_item_inside_an_e_file_value_names_the_e(tmp_path: Path) -> None:
    project = _project(tmp_path)
    write_yaml(project / "extra.yml", "cache_paths:\n  - /tmp/ok\n  - relative/path\n")
    write_yaml(project / "cc.yml", f"""\
- hosts: all
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - clear_cache:
        paths: "{{{{ cache_paths }}}}"
""")
    err = _refused(project, "-e", "@extra.yml", playbook="cc.yml")
    assert err.splitlines()[0] == ("ERROR: -e @extra.yml:3:5: 'relative/path' is not an absolute path: clear_cache "
                                   "refuses it on every host (rule relative) (from {{ cache_paths }}); used by "
                                   "clear_cache.paths[1] at cc.yml:5:9 (at cache_paths[1])"), err


def test_a_file_s_path_that_holds_a_secret_value_is_told_as_it_is(tmp_path: Path) -> None:
    """Only an -e position quotes a value: the inventory's own path is not masked where it
    happens to spell a secret (a user's home named as a token)."""
    project = _project(tmp_path)
    inventory = tmp_path / "tok-J2r7" / "inventory"
    write_yaml(inventory / "hosts.yml", INVENTORY)
    write_yaml(inventory / "group_vars" / "all.yml", "api_token: tok-J2r7\nkill_grace: soon\n")
    err = _refused(project, inventory=str(inventory / "hosts.yml"))
    assert err.splitlines()[0] == (f"ERROR: {inventory}/group_vars/all.yml:2:1: kill_old argument 'grace': 'soon' "
                                   f"is not a number (from {{{{ kill_grace }}}}){_where_used(project)} "
                                   "(at kill_grace)"), err


def test_a_play_s_timeout_is_told_at_the_play_s_line(tmp_path: Path) -> None:
    """A task that sets no timeout runs under the play's: its problem names the play's `timeout`
    line (once, not at each task); a task's own timeout is told at its own line."""
    project = _project(tmp_path)
    write_yaml(project / "pt.yml", f"""\
- hosts: all
  timeout: "{{{{ pt }}}}"
  vars:
    pt: -5
    own: -6
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - shell: "true"
      timeout: "{{{{ own }}}}"
    - shell: "true"
""")
    err = _refused(project, playbook="pt.yml")
    assert err.splitlines() == [
        "ERROR: pt.yml:4:5: timeout must be a positive number of seconds, got -5 (from {{ pt }}); used by timeout "
        "at pt.yml:2:3 (at pt)",
        "ERROR: pt.yml:5:5: timeout must be a positive number of seconds, got -6 (from {{ own }}); used by timeout "
        "at pt.yml:9:7 (at own)",
        "2 error(s); nothing was run."], err
    write_yaml(project / "pt.yml", f"- hosts: all\n  timeout: abc\n  tasks:\n"
                                   f"    - shell: touch {project / 'marks'}/x\n    - shell: 'true'\n")
    assert _refused(project, playbook="pt.yml").splitlines() == [
        "ERROR: pt.yml:2:3: timeout must be a number, not 'abc' (at timeout)", "1 error(s); nothing was run."]


def test_a_list_item_that_is_one_variable_is_told_where_that_was_set(tmp_path: Path) -> None:
    project = _project(tmp_path)
    write_yaml(project / "inventory" / "group_vars" / "all.yml", "# where\nrel: relative/path\n")
    write_yaml(project / "cc.yml", f"""\
- hosts: all
  vars:
    cache_paths: ["{{{{ rel }}}}", /tmp/ok]
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - clear_cache:
        paths: "{{{{ cache_paths }}}}"
""")
    err = _refused(project, playbook="cc.yml")
    assert err.splitlines()[0] == (f"ERROR: {project}/inventory/group_vars/all.yml:2:1: 'relative/path' is not an "
                                   "absolute path: clear_cache refuses it on every host (rule relative) (from "
                                   "{{ cache_paths[0] }} -> {{ rel }}); used by clear_cache.paths[0] at cc.yml:7:9 "
                                   "(at rel)"), err
