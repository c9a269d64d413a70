"""A problem that quotes the value of a secret-named variable it read by name (`grace: "{{
api_token }}"`, `become: "{{ api_token }}"`, `timeout: "{{ db_password }}"`) hides that value
whole, however short: masking by value leaves values under MIN_SECRET_LEN (`ab`) alone, the
name says it is a secret. On stderr (exit 4), in a host's preflight failure (the console, the
events, `opsrunner show`) and in the history."""

from __future__ import annotations

import json
from pathlib import Path

from opsrunner.secrets import MASK
from tests.conftest import write_yaml
from tests.helpers import cli

#: Values no run id (hex), temp path or message of these runs holds: seen anywhere, they leaked.
TOKEN, PASSWORD = "Zq", "Z9"
INVENTORY = f"""\
all:
  vars:
    connection: local
  hosts:
    gpu1: {{db_password: {PASSWORD}}}
    gpu2: {{}}
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "marks").mkdir(parents=True)
    write_yaml(project / "hosts.yml", INVENTORY)
    write_yaml(project / "all.yml", """\
- hosts: all
  tasks:
    - kill_old:
        pattern: nothing-matches-this
        grace: "{{ api_token }}"
    - command: "true"
      become: "{{ api_token }}"
    - command: "true"
      timeout: "{{ db_password }}"
""")
    write_yaml(project / "one.yml", f"""\
- hosts: all
  tasks:
    - shell: touch {project / "marks"}/{{{{ inventory_hostname }}}}
    - command: "true"
      timeout: "{{{{ db_password }}}}"
      when: inventory_hostname == 'gpu1'
""")
    return project


def test_a_short_secret_named_value_is_hidden_in_problems(tmp_path: Path) -> None:
    project = _project(tmp_path)
    history = tmp_path / "history.db"
    res = cli("play", "all.yml", "-i", "hosts.yml", "-l", "gpu1", "-e", f"api_token={TOKEN}", "--history",
              str(history), cwd=project)
    assert res.rc == 4, res.out + res.err
    lines = res.err.splitlines()
    assert lines[0].startswith(f"ERROR: -e api_token={MASK}: kill_old argument 'grace': '{MASK}' is not a number "
                               "(from {{ api_token }}); used by kill_old.grace at "), res.err
    assert f"become '{{{{ api_token }}}}': '{MASK}' is not a valid boolean" in res.err, res.err
    assert f"timeout must be a number, not '{MASK}' (from {{{{ db_password }}}})" in res.err, res.err
    [run] = json.loads(cli("history", "--json", "--history", str(history)).out)
    shown = cli("show", run["id"], "--history", str(history))
    assert shown.rc == 0, shown.err
    everything = res.out + res.err + shown.out + json.dumps(run)
    assert TOKEN not in everything and PASSWORD not in everything, everything
    assert list((project / "marks").iterdir()) == []


def test_a_host_s_preflight_failure_hides_a_short_secret_named_value(tmp_path: Path) -> None:
    project = _project(tmp_path)
    history, events = tmp_path / "history.db", tmp_path / "events.jsonl"
    res = cli("play", "one.yml", "-i", "hosts.yml", "--history", str(history), "--json-events", str(events),
              cwd=project)
    assert res.rc == 2, res.out + res.err  # gpu1 failed its preflight, gpu2 ran
    assert sorted(p.name for p in (project / "marks").iterdir()) == ["gpu2"]
    assert f"timeout must be a number, not '{MASK}' (from {{{{ db_password }}}})" in res.out, res.out
    [run] = json.loads(cli("history", "--json", "--history", str(history)).out)
    shown = cli("show", run["id"], "--history", str(history))
    assert shown.rc == 0 and f"not '{MASK}' (from {{{{ db_password }}}})" in shown.out, shown.out + shown.err
    everything = res.out + res.err + shown.out + events.read_text() + json.dumps(run)
    assert PASSWORD not in everything, everything


def test_a_long_secret_named_value_shows_no_part_of_it(tmp_path: Path) -> None:
    """A value longer than a message quotes (cut to 80 characters and `...`) is hidden whole too:
    masking by value missed its cut form, which showed its first 76 characters."""
    project = _project(tmp_path)
    token = "Q" * 50 + "W" * 50
    res = cli("check", "all.yml", "-i", "hosts.yml", "-l", "gpu1", "-e", f"api_token={token}", cwd=project)
    assert res.rc == 4, res.out + res.err
    assert f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ api_token }}}})" in res.err, res.err
    assert "QQQ" not in res.err and "WWW" not in res.err, res.err


def test_a_short_secret_read_through_a_key_a_filter_or_a_chain_is_hidden(tmp_path: Path) -> None:
    """A value read through a secret-named variable anywhere in its template (a key of it, an
    item, a filter on it, text around it, a variable that reads it, a boolean keyword, a
    lease, a delegate_to, a grace against its deadline) is hidden whole in the problem."""
    project = tmp_path / "proj"
    write_yaml(project / "hosts.yml", "all:\n  vars:\n    connection: local\n  hosts:\n    gpu1: {}\n")
    write_yaml(project / "keys.yml", f"""\
- hosts: all
  vars:
    creds: {{token: {TOKEN}}}
    api_tokens: [{TOKEN}]
    g: "{{{{ api_token }}}}"
  tasks:
    - {{command: "true", become: "{{{{ g }}}}"}}
    - kill_old: {{pattern: a, grace: "{{{{ creds.token }}}}"}}
    - kill_old: {{pattern: b, grace: "{{{{ creds['token'] }}}}"}}
    - kill_old: {{pattern: c, grace: "{{{{ api_tokens[0] }}}}"}}
    - kill_old: {{pattern: d, grace: "{{{{ api_token | upper }}}}"}}
    - kill_old: {{pattern: e, grace: "{{{{ api_token }}}}s"}}
    - {{command: "true", timeout: "{{{{ api_token | lower }}}}"}}
    - {{command: "true", delegate_to: "{{{{ api_token }}}}"}}
""")
    res = cli("check", "keys.yml", "-i", "hosts.yml", "-e", f"api_token={TOKEN}", cwd=project)
    assert res.rc == 4, res.out + res.err
    for told in (f"become '{{{{ g }}}}': '{MASK}' is not a valid boolean",
                 f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ creds.token }}}})",
                 f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ creds['token'] }}}})",
                 f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ api_tokens[0] }}}})",
                 f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ api_token | upper }}}})",
                 f"kill_old argument 'grace': '{MASK}' is not a number (from {{{{ api_token }}}}s)",
                 f"timeout must be a number, not '{MASK}' (at timeout)",
                 f"delegate_to supports only localhost, not '{MASK}' (at delegate_to)"):
        assert told in res.err, res.err
    assert TOKEN not in res.err and TOKEN.upper() not in res.err and TOKEN.lower() not in res.err, res.err
    write_yaml(project / "lease.yml", "- hosts: all\n  tasks:\n"
               "    - kill_old: {pattern: a, grace: \"{{ db_password }}\"}\n      timeout: 5\n")
    res = cli("check", "lease.yml", "-i", "hosts.yml", "-e", '{"db_password": 30, "job_lock_lease": "{{ api_token }}"}',
              "-e", f"api_token={TOKEN}", cwd=project)
    assert res.rc == 4, res.out + res.err
    assert f"must be a positive number of seconds, got '{MASK}' (at job_lock_lease)" in res.err, res.err
    assert f"is not longer than its grace ({MASK} s)" in res.err, res.err
    assert TOKEN not in res.err and "30 s" not in res.err, res.err


def test_a_hidden_value_leaves_positions_and_file_names_whole(tmp_path: Path) -> None:
    """Only where the problem quotes the value is it hidden: an 8 or a 0 elsewhere (a line
    number, a file's name) is no secret (it showed `maxtok.yml:********:30`, `deadline********.yml`)."""
    project = tmp_path / "proj"
    write_yaml(project / "hosts.yml", "all:\n  vars:\n    connection: local\n  hosts:\n    gpu1: {}\n")
    write_yaml(project / "maxtok.yml", "- hosts: all\n  gather_facts: false\n  vars:\n    x: 1\n  tasks:\n"
               "    - {name: n, debug: {msg: hi}}\n    - {name: m, debug: {msg: hi}}\n"
               "    - kill_old: {pattern: x, signal: \"{{ max_tokens }}\"}\n")
    res = cli("check", "maxtok.yml", "-i", "hosts.yml", "-e", '{"max_tokens": 8}', cwd=project)
    assert res.rc == 4, res.err
    assert f"'{MASK}' is not one of " in res.err and "used by kill_old.signal at maxtok.yml:8:" in res.err, res.err
    write_yaml(project / "deadline0.yml", "- hosts: all\n  tasks:\n"
               "    - {command: \"true\", timeout: \"{{ db_password }}\"}\n")
    res = cli("check", "deadline0.yml", "-i", "hosts.yml", "-e", '{"db_password": 0}', cwd=project)
    assert res.rc == 4, res.err
    assert f"got {MASK} (from {{{{ db_password }}}}); used by timeout at deadline0.yml:3:" in res.err, res.err
