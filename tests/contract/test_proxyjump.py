"""ProxyJump: the `strict` / `accept-new` / `off` host-key policy applies to every hop
(issue 13 item 13). A second private sshd is the jump host, the suite's sshd the target;
the hop comes from ~/.ssh/config, as users write it."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_inventory, write_yaml
from tests.helpers import cli_subprocess, read_events, task_ends
from tests.sshd import PrivateSSHD

PB = """
- hosts: all
  tasks:
    - name: probe
      shell: echo "reached $(id -un)"
"""


def _run(tmp_path: Path, sshd: PrivateSSHD, jump: PrivateSSHD, known: str, mode: str) -> tuple[int, dict, Path]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "config").write_text(
        f"Host jumpbox\n  HostName 127.0.0.1\n  Port {jump.port}\n  User {jump.user}\n  IdentityFile {jump.key_file}\n"
        f"Host target\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_file}\n  ProxyJump jumpbox\n")
    known_file = tmp_path / "known_hosts"
    known_file.write_text(known)
    inv = write_inventory(tmp_path / "inv.yml", {"target": {"known_hosts_file": str(known_file),
                                                            "host_key_checking": mode}})
    pb = write_yaml(tmp_path / "pb.yml", PB)
    events = tmp_path / "ev.jsonl"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events),
                         env={"HOME": str(home), "SSH_AUTH_SOCK": ""})
    return res.rc, task_ends(read_events(events))[0], known_file


def _line(server: PrivateSSHD) -> str:
    return f"[127.0.0.1]:{server.port} {server.host_pub}\n"


def test_strict_refuses_an_unknown_jump_host(tmp_path: Path, sshd: PrivateSSHD, jump: PrivateSSHD) -> None:
    rc, end, known = _run(tmp_path, sshd, jump, _line(sshd), "strict")  # only the target is known
    assert rc == 3 and end["status"] == "unreachable", end
    assert f"unknown host key for [127.0.0.1]:{jump.port}" in end["msg"]
    assert known.read_text() == _line(sshd)  # nothing was added


def test_strict_passes_when_every_hop_is_known(tmp_path: Path, sshd: PrivateSSHD, jump: PrivateSSHD) -> None:
    rc, end, _ = _run(tmp_path, sshd, jump, _line(sshd) + _line(jump), "strict")
    assert rc == 0, end
    assert end["stdout_tail"] == f"reached {sshd.user}"


def test_accept_new_records_the_jump_host_key(tmp_path: Path, sshd: PrivateSSHD, jump: PrivateSSHD) -> None:
    rc, end, known = _run(tmp_path, sshd, jump, _line(sshd), "accept-new")
    assert rc == 0, end
    assert known.read_text() == _line(sshd) + _line(jump)


def test_changed_jump_host_key_is_refused_even_with_accept_new(tmp_path: Path, sshd: PrivateSSHD,
                                                                jump: PrivateSSHD) -> None:
    wrong = f"[127.0.0.1]:{jump.port} {sshd.host_pub}\n"  # another server's key under the jump's name
    rc, end, known = _run(tmp_path, sshd, jump, _line(sshd) + wrong, "accept-new")
    assert rc == 3 and end["status"] == "unreachable", end
    assert f"host key for ProxyJump hop [127.0.0.1]:{jump.port} has CHANGED" in end["msg"]
    assert known.read_text() == _line(sshd) + wrong


def test_off_accepts_any_hop(tmp_path: Path, sshd: PrivateSSHD, jump: PrivateSSHD) -> None:
    rc, end, known = _run(tmp_path, sshd, jump, "", "off")
    assert rc == 0, end
    assert known.read_text() == ""  # `off` checks nothing and records nothing
