"""A `secret_name_patterns` that the playbook sets (a play's vars, its vars_files, a role's vars,
a task's vars) hides the -e values it names in the run's history as the inventory's does: the
recorded command line and extra vars, in the database's bytes, `history --json` and `show`;
for a run that succeeds and for one refused for bad input (exit 4)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests import pg
from tests.helpers import ProjectEnv

CRED = "hunter2-Qz7"  # -e db_cred: secret only because the playbook says `*_cred` is
INVENTORY = "all:\n  hosts:\n    node1: {connection: local}\n"
TASK = "    - command: echo {{ db_cred | length }}\n"


def _playbook(where: str, project: Path) -> str:
    """A playbook that sets `secret_name_patterns: ['*_cred']` in `where`."""
    (project / "patterns.yml").write_text("secret_name_patterns: ['*_cred']\n")
    role = project / "roles" / "creds" / "vars"
    role.mkdir(parents=True, exist_ok=True)
    (role / "main.yml").write_text("secret_name_patterns: ['*_cred']\n")
    (role.parent / "tasks").mkdir(exist_ok=True)
    (role.parent / "tasks" / "main.yml").write_text("- command: echo {{ db_cred | length }}\n")
    head = "- hosts: all\n  gather_facts: false\n"
    return {"play vars": head + "  vars: {secret_name_patterns: ['*_cred']}\n  tasks:\n" + TASK,
            "vars_files": head + "  vars_files: [patterns.yml]\n  tasks:\n" + TASK,
            "role vars": head + "  roles: [creds]\n",
            "task vars": head + "  tasks:\n" + TASK + "      vars: {secret_name_patterns: ['*_cred']}\n"}[where]


def _history_bytes(env: ProjectEnv) -> bytes:
    sqlite3.connect(env.history_db).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    return b"".join(p.read_bytes() for p in env.root.glob("history.db*"))


def _assert_recorded_masked(env: ProjectEnv, out: str) -> None:
    """The run's row says `-e db_cred=********`, in every reader and the database's bytes."""
    [run] = env.history()
    assert "-e 'db_cred=********'" in run["command"] and run["extra_vars"] == {"db_cred": "********"}, run
    shown = env.run("show", run["id"])
    assert shown.rc == 0 and "db_cred=********" in shown.out, shown.out + shown.err
    listing = env.run("history", "--json")
    for where, text in (("the run's output", out), ("show", shown.out), ("history --json", listing.out)):
        assert CRED not in text, f"{CRED!r} in {where}"
    assert CRED.encode() not in _history_bytes(env), "the secret is in the history database"


@pytest.mark.parametrize("where", ["play vars", "vars_files", "role vars", "task vars"])
def test_a_playbook_s_secret_name_patterns_hide_an_e_value_in_the_history(tmp_path: Path, where: str) -> None:
    env = ProjectEnv(tmp_path)
    (env.project / "inv.yml").write_text(INVENTORY)
    (env.project / "site.yml").write_text(_playbook(where, env.project))
    res = env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_cred={CRED}")
    assert res.rc == 0, res.out + res.err
    assert "changed: [node1]" in res.out  # the run went through, with the value
    _assert_recorded_masked(env, res.out + res.err)


def test_a_refused_playbook_s_patterns_hide_an_e_value_in_the_history(tmp_path: Path) -> None:
    """A playbook with a problem (exit 4, nothing run) still configures its patterns: its row
    is written from the file as YAML."""
    env = ProjectEnv(tmp_path)
    (env.project / "inv.yml").write_text(INVENTORY)
    (env.project / "site.yml").write_text(_playbook("play vars", env.project) + "      no_such_keyword: 1\n")
    res = env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_cred={CRED}")
    assert res.rc == 4 and "site.yml:6:7: unknown module or keyword 'no_such_keyword'" in res.err, res.out + res.err
    _assert_recorded_masked(env, res.out + res.err)


#: A refused playbook's patterns written outside its own file: (the playbook, what it names).
REFUSED_ELSEWHERE = {
    "vars_files": "  vars_files: [patterns.yml]\n",
    "first-found vars_files beside a broken one": "  vars_files: [broken.yml, [missing.yml, patterns.yml]]\n",
    "role vars": "  roles: [creds]\n",
    "role defaults, included": "  tasks:\n    - include_role: {name: credsd}\n",
}


@pytest.mark.parametrize("where", list(REFUSED_ELSEWHERE))
def test_a_refused_playbook_s_vars_files_and_roles_hide_an_e_value_in_the_history(tmp_path: Path,
                                                                                  where: str) -> None:
    """A playbook refused at load was read as YAML for its own patterns only: one set in its
    vars_files or a role's vars or defaults left `-e db_cred=...` in clear in the history. The
    files it names are read too; a broken one is passed over (the refusal is told as before)."""
    env = ProjectEnv(tmp_path)
    (env.project / "inv.yml").write_text(INVENTORY)
    _playbook("role vars", env.project)  # writes patterns.yml and roles/creds
    defaults = env.project / "roles" / "credsd" / "defaults"
    defaults.mkdir(parents=True)
    (defaults / "main.yml").write_text("secret_name_patterns: ['*_cred']\n")
    (defaults.parent / "tasks").mkdir()
    (defaults.parent / "tasks" / "main.yml").write_text("- command: echo hi\n")
    (env.project / "broken.yml").write_text("secret_name_patterns: [unclosed\n")
    bad_play = "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: echo hi\n      no_such_keyword: 1\n"
    (env.project / "site.yml").write_text("- hosts: all\n  gather_facts: false\n" + REFUSED_ELSEWHERE[where]
                                          + bad_play)
    res = env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_cred={CRED}")
    assert res.rc == 4 and "unknown module or keyword 'no_such_keyword'" in res.err, res.out + res.err
    assert "Traceback" not in res.out + res.err
    _assert_recorded_masked(env, res.out + res.err)


def test_a_play_s_patterns_hide_an_e_value_in_a_postgresql_history(tmp_path: Path,
                                                                  postgres: pg.PrivatePostgres) -> None:
    import psycopg

    url = postgres.new_database("play_patterns")
    env = ProjectEnv(tmp_path)
    env.vars["OPSRUNNER_HISTORY"] = url
    (env.project / "inv.yml").write_text(INVENTORY)
    (env.project / "site.yml").write_text(_playbook("play vars", env.project))
    res = env.run("play", "site.yml", "-i", "inv.yml", "-e", f"db_cred={CRED}")
    assert res.rc == 0, res.out + res.err
    with psycopg.connect(url) as conn:
        columns = conn.execute("SELECT table_name, column_name FROM information_schema.columns "
                               "WHERE table_schema = 'public' AND data_type IN ('text', 'jsonb', 'json')").fetchall()
        assert ("runs", "command") in columns
        for table, column in columns:
            found = conn.execute(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text LIKE %s',
                                 (f"%{CRED}%",)).fetchone()
            assert found == (0,), f"{CRED!r} in {table}.{column}"
        [(command,)] = conn.execute("SELECT command FROM runs").fetchall()
    assert "-e 'db_cred=********'" in command, command
    [run] = json.loads(env.run("history", "--json").out)
    assert run["extra_vars"] == {"db_cred": "********"}
