"""One secret through every output opsrunner writes: the console (-vvv), stderr, JSON events,
the run history (its database file, `history --json`, `show`), errors, scheduled runs and
their alerts. The secret is secret three ways: by the inventory's own secret_name_patterns
(`*_pin`, not a default pattern), by a `!secret` tag, and by a no_log task's output. Each
value is proven to reach the task (a file the task writes holds it), and then found in no
output of opsrunner's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.alerts import Alerts
from tests.helpers import ProjectEnv, cli_subprocess

PIN = "pin-7Qx93f"  # -e deploy_pin: secret only because the inventory says `*_pin` is
VAULT = "vault-K2m8vw"  # tagged !secret in the inventory
HIDDEN = "nolog-Z4t1xq"  # printed by a no_log task (its command spells it otherwise)
SECRETS = (PIN, VAULT, HIDDEN)

INVENTORY = f"""all:
  vars:
    secret_name_patterns: ["*_pin", "*password*"]
    vault_word: !secret "{VAULT}"
  hosts:
    node1:
      connection: local
"""

PLAYBOOK = """- name: Deploy
  hosts: all
  gather_facts: false
  tasks:
    - name: "Use {{ deploy_pin }}"
      shell: "echo pin={{ deploy_pin }} vault={{ vault_word }} | tee {{ out_file }}"
    - name: Hidden
      shell: "printf 'nolog-%s\\n' Z4t1xq | tee -a {{ out_file }}"
      no_log: true
    - name: Fail with it
      fail:
        msg: "bad pin {{ deploy_pin }} with {{ vault_word }}"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "inv.yml").write_text(INVENTORY)
    (proj / "site.yml").write_text(PLAYBOOK)
    return proj


def _env(tmp_path: Path) -> dict[str, str]:
    return ProjectEnv(tmp_path).vars


def _extra(out_file: Path) -> list[str]:
    return ["-e", f"deploy_pin={PIN}", "-e", f"out_file={out_file}"]


def _history_bytes(tmp_path: Path) -> bytes:
    """Every byte of the history database and its journal files, as they are on disk."""
    db = tmp_path / "history.db"
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    return b"".join(p.read_bytes() for p in tmp_path.glob("history.db*"))


def _assert_nowhere(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in SECRETS:
        assert secret.encode() not in data, f"{secret!r} found in {where}"


def test_a_secret_reaches_the_task_and_no_output(tmp_path: Path, project: Path) -> None:
    out_file = tmp_path / "task-output.txt"
    events = tmp_path / "events.jsonl"
    env = _env(tmp_path)
    res = cli_subprocess("play", "site.yml", "-i", "inv.yml", *_extra(out_file), "-vvv", "--json-events",
                         str(events), cwd=project, env=env)
    assert res.rc == 2, res.out + res.err  # the last task fails, quoting the secrets
    assert out_file.read_text().split() == [f"pin={PIN}", f"vault={VAULT}", HIDDEN]  # they did reach the task
    assert "bad pin ******** with ********" in res.out and "PLAY RECAP" in res.out
    _assert_nowhere("the console (-vvv)", res.out)
    _assert_nowhere("stderr", res.err)
    _assert_nowhere("--json-events", events.read_text())
    _assert_nowhere("the history database", _history_bytes(tmp_path))
    listing = cli_subprocess("history", "--json", cwd=project, env=env)
    [run] = json.loads(listing.out)
    assert run["extra_vars"]["deploy_pin"] == "********" and "deploy_pin=********" in run["command"]
    assert [t["task"] for t in run["tasks"]] == ["Use ********", "Hidden", "Fail with it"]
    _assert_nowhere("history --json", listing.out)
    _assert_nowhere("show", cli_subprocess("show", run["id"], cwd=project, env=env).out)


def test_a_copied_secret_is_not_shown_in_base64_at_vvv(tmp_path: Path, project: Path) -> None:
    """copy's content travels base64-encoded to the agent: -vvv tells its size, never the
    bytes (masking by value cannot follow a secret into its encoding)."""
    import base64

    out_file = tmp_path / "copied.txt"
    (project / "copy.yml").write_text('- hosts: all\n  gather_facts: false\n  tasks:\n'
                                      '    - copy: {content: "{{ deploy_pin }}", dest: "{{ out_file }}"}\n')
    res = cli_subprocess("play", "copy.yml", "-i", "inv.yml", *_extra(out_file), "-vvv", cwd=project,
                         env=_env(tmp_path))
    assert res.rc == 0, res.out + res.err
    assert out_file.read_text() == PIN  # it did reach the host
    assert f'"content_b64": "<{len(PIN)} bytes>"' in res.out, res.out
    assert base64.b64encode(PIN.encode()).decode() not in res.out + res.err
    _assert_nowhere("the console (-vvv)", res.out)


def test_a_secret_in_an_error_before_any_host_is_masked(tmp_path: Path, project: Path) -> None:
    """Preflight's problems quote the variable's value: masked on stderr, for check and play."""
    (project / "bad.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                                     "    - command: 'true'\n      timeout: '{{ deploy_pin }}'\n")
    for command in ("check", "play"):
        res = cli_subprocess(command, "bad.yml", "-i", "inv.yml", *_extra(tmp_path / "o"), cwd=project,
                             env=_env(tmp_path))
        assert res.rc == 4, res.out + res.err
        assert "-e deploy_pin=********: " in res.err and "used by timeout at bad.yml:5:7" in res.err, res.err
        _assert_nowhere(f"{command}'s error", res.out + res.err)


PLAY_SECRET = "play-H7w2pq"  # secret-named vars of the playbook itself: play, task and vars_files
TASK_SECRET = "task-B5n8rk"
FILE_SECRET = "file-M3c6tz"


@pytest.mark.parametrize("where", ["play vars", "task vars", "vars_files"])
def test_a_playbook_secret_in_an_error_before_any_host_is_masked(tmp_path: Path, project: Path, where: str) -> None:
    """The playbook's own secret-named variables, not only the inventory's and -e's: preflight's
    problem quotes the rendered value, masked for check and play (exit 4), in every sink."""
    secret = {"play vars": PLAY_SECRET, "task vars": TASK_SECRET, "vars_files": FILE_SECRET}[where]
    (project / "secrets.yml").write_text(f"db_password: {FILE_SECRET}\n")
    play_vars = {"play vars": f"  vars: {{db_password: {PLAY_SECRET}}}\n",
                 "vars_files": "  vars_files: [secrets.yml]\n"}.get(where, "")
    task_vars = f"      vars: {{db_password: {TASK_SECRET}}}\n" if where == "task vars" else ""
    (project / "bad.yml").write_text(f"- hosts: all\n  gather_facts: false\n{play_vars}  tasks:\n"
                                     f"    - pause: {{seconds: '{{{{ db_password }}}}'}}\n{task_vars}")
    events = tmp_path / "events.jsonl"
    for command in ("check", "play"):
        extra = ["--json-events", str(events)] if command == "play" else []
        res = cli_subprocess(command, "bad.yml", "-i", "inv.yml", *extra, cwd=project, env=_env(tmp_path))
        assert res.rc == 4, res.out + res.err
        assert "bad.yml:" in res.err and "'********' is not a number" in res.err, res.err
        assert secret not in res.out + res.err, res.err
    assert events.read_text() == ""  # exit 4: no play started, no event written


def test_a_no_log_task_s_preflight_problem_says_where_not_what(tmp_path: Path, project: Path) -> None:
    """no_log hides a task's arguments in every output: a preflight problem of such a task names
    its file, line and key, not the value, whether it fails every host (exit 4) or one (exit 2)."""
    value = "notasecretname-R9k4"  # no secret-like name: only no_log hides it
    for when, rc in (("", 4), ("      when: inventory_hostname == 'node1'\n", 2)):
        (project / "nolog.yml").write_text(
            "- hosts: all\n  gather_facts: false\n  vars: {wait: " + value + "}\n  tasks:\n"
            "    - pause: {seconds: '{{ wait }}'}\n      no_log: true\n" + when)
        inventory = project / "inv2.yml"
        inventory.write_text("all:\n  hosts:\n    node1: {connection: local}\n    node2: {connection: local}\n")
        events = tmp_path / f"nolog-{rc}.jsonl"
        res = cli_subprocess("play", "nolog.yml", "-i", str(inventory), "--json-events", str(events), cwd=project,
                             env=_env(tmp_path))
        assert res.rc == rc, res.out + res.err
        told = res.out + res.err
        assert "nolog.yml:5:15: a problem here; its details are hidden: no_log is set on this task " \
               "(at pause.seconds)" in told, told
        assert value not in told + events.read_text()


def test_a_scheduled_run_and_its_alert_mask_the_secret(tmp_path: Path, project: Path, alerts: Alerts) -> None:
    out_file = tmp_path / "task-output.txt"
    env = _env(tmp_path)
    added = cli_subprocess("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", *_extra(out_file),
                           "--at", "Sun 03:00", "--notify", alerts.url, cwd=project, env=env)
    assert added.rc == 0, added.err
    _assert_nowhere("schedule add", added.out + added.err)
    res = cli_subprocess("schedule", "run", "nightly", cwd=tmp_path, env=env)
    assert res.rc == 2, res.out + res.err
    assert out_file.read_text().split() == [f"pin={PIN}", f"vault={VAULT}", HIDDEN]
    _assert_nowhere("schedule run's output", res.out + res.err)
    [body] = alerts.bodies
    alert = json.loads(body)
    assert "- [node1] Fail with it: bad pin ******** with ********" in alert["message"]
    _assert_nowhere("the alert", body)
    _assert_nowhere("the history database", _history_bytes(tmp_path))
    [run] = json.loads(cli_subprocess("history", "--json", cwd=project, env=env).out)
    assert run["schedule"] == "nightly" and run["extra_vars"]["deploy_pin"] == "********"
    _assert_nowhere("schedule list", cli_subprocess("schedule", "list", cwd=project, env=env).out)
