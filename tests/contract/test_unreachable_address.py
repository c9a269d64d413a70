"""An unreachable host's reason names the address and port tried, as Ansible's `ssh: connect to
host H port P: ...` does: refused, timed out, a ProxyJump hop refused, a target its hop could
not reach. With many hosts, host:port is what tells them apart. 127.0.0.1 only."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.conftest import write_inventory, write_yaml
from tests.helpers import cli_subprocess, read_events, task_ends
from tests.sshd import PrivateSSHD, free_port

PB = "- hosts: all\n  tasks:\n    - name: probe\n      shell: echo reached\n"


def _unreachable(tmp_path: Path, host: dict, ssh_config: str = "") -> tuple[str, str]:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "config").write_text(ssh_config)
    inv = write_inventory(tmp_path / "inv.yml", {"box": {"known_hosts_file": str(tmp_path / "known"), **host}})
    pb = write_yaml(tmp_path / "pb.yml", PB)
    events = tmp_path / "ev.jsonl"
    res = cli_subprocess("play", str(pb), "-i", str(inv), "--json-events", str(events), "--no-history",
                         env={"HOME": str(home), "SSH_AUTH_SOCK": ""}, timeout=60)
    assert res.rc == 3, res.out + res.err
    end = task_ends(read_events(events))[0]
    assert end["status"] == "unreachable", end
    return end["msg"], res.out


def test_a_refused_connection_names_the_address_and_port(tmp_path: Path) -> None:
    port = free_port()
    msg, out = _unreachable(tmp_path, {"host": "127.0.0.1", "port": port})
    assert msg == f"connect to host 127.0.0.1 port {port}: connection refused"
    assert f"fatal: [box]: UNREACHABLE! => connect to host 127.0.0.1 port {port}: connection refused\n" in out


def test_a_connection_that_times_out_names_the_address_and_port(tmp_path: Path) -> None:
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)  # one connection fills its queue: the kernel drops the next SYNs
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            msg, _ = _unreachable(tmp_path, {"host": "127.0.0.1", "port": port, "connect_timeout": 1})
    assert msg == f"connect to host 127.0.0.1 port {port}: connection timed out after 1s"


def test_a_refused_proxyjump_hop_is_named_with_its_address(tmp_path: Path) -> None:
    hop, target = free_port(), free_port()
    config = (f"Host jumpbox\n  HostName 127.0.0.1\n  Port {hop}\n"
              f"Host box\n  HostName 127.0.0.1\n  Port {target}\n  ProxyJump jumpbox\n")
    msg, _ = _unreachable(tmp_path, {}, config)
    assert msg == f"connect to ProxyJump hop 127.0.0.1 port {hop}: connection refused"


def test_a_target_its_hop_cannot_reach_is_named_with_the_hop(tmp_path: Path, jump: PrivateSSHD) -> None:
    target = free_port()
    config = (f"Host jumpbox\n  HostName 127.0.0.1\n  Port {jump.port}\n  User {jump.user}\n"
              f"  IdentityFile {jump.key_file}\n"
              f"Host box\n  HostName 127.0.0.1\n  Port {target}\n  ProxyJump jumpbox\n")
    msg, _ = _unreachable(tmp_path, {"host_key_checking": "off"}, config)
    assert msg.startswith(f"connect to host 127.0.0.1 port {target} through ProxyJump hop [127.0.0.1]:{jump.port}: "
                          "the hop could not connect ("), msg
