"""A templated value inside an argv-style wrapper layer stays one argument (issue 13 item 11),
over ssh through both hostile wrappers."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FD_HOLDER, REAPER, write_inventory, write_yaml
from tests.helpers import cli, read_events, task_ends
from tests.sshd import PrivateSSHD


def test_injected_command_in_wrapper_variable_does_not_run(tmp_path: Path, sshd: PrivateSSHD) -> None:
    flag = tmp_path / "INJECTED"
    # `env NAME=VALUE` stands in for `pct exec CTID --`: a prefix taking one templated word;
    # split into words, this value would make env run `touch` (the unit test has pct's case).
    ctid = f"200 /bin/sh -c 'touch {flag}'"
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(
        wrapper=[REAPER, FD_HOLDER, "env OPSRUNNER_CTID={{ ctid }}"], ctid=ctid)})
    pb = write_yaml(tmp_path / "pb.yml", """
- hosts: all
  tasks:
    - name: where am I
      shell: echo "ctid=$OPSRUNNER_CTID"
""")
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events))
    assert res.rc == 0, res.out
    assert not flag.exists()
    assert task_ends(read_events(events))[0]["stdout_tail"] == f"ctid={ctid}"
