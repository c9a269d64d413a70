"""Host data is never templated again (issue 13 item 5): output, messages and registered
results that contain `{{ ... }}` stay literal text, over ssh through both hostile wrappers."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import FD_HOLDER, REAPER, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends
from tests.sshd import PrivateSSHD

CONTROLLER_SECRET = "controller-only-8c1e5f"


def test_remote_output_with_template_syntax_is_data(tmp_path: Path, sshd: PrivateSSHD,
                                                     monkeypatch: object) -> None:
    os.environ["OPSRUNNER_TEST_CONTROLLER_X"] = CONTROLLER_SECRET
    try:
        inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])})
        pb = write_yaml(tmp_path / "pb.yml", """
- hosts: all
  tasks:
    - name: target prints a template
      # The playbook itself holds no template: the target assembles the braces.
      shell: |
        b='{'; p='%'
        echo "$b$b lookup(\\"env\\",\\"OPSRUNNER_TEST_CONTROLLER_X\\") }}"
        echo "$b$p if true $p}x$b$p endif $p}"
        echo '}}'
      register: r
      failed_when: "'{{' in r.stdout and r.rc != 0"
      changed_when: "'{%' not in r.stdout"
    - name: shown with msg
      debug: {msg: "got {{ r.stdout_lines[0] }}"}
    - name: shown with var
      debug: {var: r.stdout_lines}
    - name: until reads it too
      shell: b='{'; echo "$b$b 7 * 7 }}"
      register: u
      until: u.stdout is defined
      retries: 1
      delay: 0
    - name: derived variable
      debug: {msg: "{{ derived }}"}
      vars:
        derived: "{{ u.stdout | trim }}"
""")
        events = tmp_path / "ev.jsonl"
        res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), "-v")
    finally:
        del os.environ["OPSRUNNER_TEST_CONTROLLER_X"]
    assert res.rc == 0, res.out + res.err
    assert CONTROLLER_SECRET not in res.out + events.read_text()
    ends = {e["task"]: e for e in task_ends(read_events(events))}
    assert ends["target prints a template"]["status"] == "ok"  # failed_when/changed_when evaluated fine
    assert ends["shown with msg"]["msg"] == 'got {{ lookup("env","OPSRUNNER_TEST_CONTROLLER_X") }}'
    assert '"{% if true %}x{% endif %}"' in ends["shown with var"]["msg"]
    assert ends["derived variable"]["msg"] == "{{ 7 * 7 }}"  # not 49
