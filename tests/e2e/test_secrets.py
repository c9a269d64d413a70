"""Secrets (issue 13 item 4) end to end, over ssh through both hostile wrappers: masked in
console output at -vvv, in JSON events and in error messages; never in the target's process
list; `no_log` at task and play level."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from opsrunner.secrets import CENSORED, MASK
from tests.conftest import FD_HOLDER, REAPER, ROOT, kill_marked, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends
from tests.sshd import PrivateSSHD

CLI_SECRET = "CLISECRET-4f1d9a"  # -e db_password=...
INV_SECRET = "INVSECRET-77b2c0"  # inventory host var api_token
TAG_SECRET = "TAGSECRET-e3a8d5"  # !secret in a vars file, under an innocent name
SECRETS = (CLI_SECRET, INV_SECRET, TAG_SECRET)


def _inventory(tmp_path: Path, sshd: PrivateSSHD) -> Path:
    return write_inventory(tmp_path / "inv.yml",
                           {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER], api_token=INV_SECRET)})


def _cmdlines() -> str:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                out.append(Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return "\n".join(out)


def test_secrets_masked_everywhere_and_absent_from_target_argv(tmp_path: Path, sshd: PrivateSSHD,
                                                               cleanup_marker: str) -> None:
    write_yaml(tmp_path / "secret_vars.yml", f"deploy_key: !secret {TAG_SECRET}\n")
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  vars_files: [secret_vars.yml]
  tasks:
    - name: use the secrets
      shell:
        cmd: >-
          test "$PW" = "{{{{ db_password }}}}" && test "$TOK" = "{{{{ api_token }}}}" &&
          echo "pw={{{{ db_password }}}} tok={{{{ api_token }}}} key={{{{ deploy_key }}}}" &&
          echo "err {{{{ deploy_key }}}}" >&2 && sleep {cleanup_marker}
        env: {{PW: "{{{{ db_password }}}}", TOK: "{{{{ api_token }}}}"}}
      timeout: 60
""")
    events = tmp_path / "ev.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "opsrunner", "play", str(pb), "-i", str(_inventory(tmp_path, sshd)),
         "-e", f"db_password={CLI_SECRET}", "-vvv", "--json-events", str(events)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: bool(pids_with(cleanup_marker)), 30)
        # While the task runs on the target: no process there (sh -c, env, wrappers,
        # watchdog) carries a secret in its command line. Our own CLI's `-e` does, by design.
        visible = "\n".join(line for line in _cmdlines().splitlines() if "-m opsrunner play" not in line)
        for secret in SECRETS:
            assert secret not in visible, secret
    finally:
        kill_marked(cleanup_marker)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out  # the sleep was killed: the task failed, with its output shown
    text = out + events.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    assert f"pw={MASK} tok={MASK} key={MASK}" in out  # stdout shown, masked
    assert f"err {MASK}" in out
    assert "script on stdin:" in out and f'test "$PW" = "{MASK}"' in out  # -vvv echo, masked
    end = task_ends(read_events(events))[0]
    assert end["stdout_tail"] == f"pw={MASK} tok={MASK} key={MASK}"


def test_secret_in_error_message_is_masked(tmp_path: Path, sshd: PrivateSSHD) -> None:
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: all
  tasks:
    - name: wrong type
      pause: {seconds: "{{ db_password }}"}
""")
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(_inventory(tmp_path, sshd)), "-e", f"db_password={CLI_SECRET}",
              "-vvv", "--json-events", str(events))
    assert res.rc == 4  # refused by preflight, before any host is touched
    assert CLI_SECRET not in res.out + res.err
    assert f"'{MASK}' is not a number" in res.err


def test_no_log_task_and_play_hide_arguments_and_results(tmp_path: Path, sshd: PrivateSSHD) -> None:
    inv = _inventory(tmp_path, sshd)
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: all
  tasks:
    - name: hidden task
      shell: echo "visible-only-to-register $((40 + 2))"; exit 3
      no_log: true
      register: r
      ignore_errors: true
    - name: shown task
      debug: {msg: "registered value still real: {{ r.stdout }}"}
- hosts: all
  no_log: "{{ 1 == 1 }}"
  tasks:
    - name: play-level hidden
      debug: {msg: "play-level-plaintext"}
    - name: task overrides play
      debug: {msg: "task-level-shown"}
      no_log: false
""")
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "-vvv", "--json-events", str(events))
    assert res.rc == 0, res.out
    text = res.out + events.read_text()
    shown = "registered value still real: visible-only-to-register 42"
    assert "visible-only-to-register" not in text.replace(shown, "")
    assert "echo " not in text  # the -vvv echo of the hidden task is hidden too
    assert "(hidden: no_log)" in res.out
    assert "play-level-plaintext" not in text
    assert shown in res.out
    assert "task-level-shown" in res.out
    ends = {e["task"]: e for e in task_ends(read_events(events))}
    hidden = ends["hidden task"]
    assert (hidden["status"], hidden["ignored"], hidden["msg"], hidden["rc"]) == ("failed", True, CENSORED, None)
    assert ends["play-level hidden"]["msg"] == CENSORED
    assert "fatal: [h]: FAILED! => " + CENSORED in res.out
