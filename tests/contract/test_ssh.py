"""SSH transport behaviour against the private test sshd: reachability, host keys, reuse,
parallel hosts, ssh_config aliases, and proof that the test wrappers really are hostile."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.conftest import FD_HOLDER, REAPER, kill_marked, pids_with, wait_for, write_inventory, write_yaml
from tests.helpers import cli, cli_subprocess, opsrunner_process, read_events, started, task_ends
from tests.sshd import PrivateSSHD, accepted_logins, free_port


def run(tmp_path: Path, hosts: dict, body: str, *args: str) -> tuple[int, str, list[dict]]:
    inv = write_inventory(tmp_path / "inv.yml", hosts)
    pb = write_yaml(tmp_path / "pb.yml", body)
    events = tmp_path / "ev.jsonl"
    res = cli("play", str(pb), "-i", str(inv), "--json-events", str(events), *args, cwd=tmp_path)
    return res.rc, res.out + res.err, read_events(events)


SIMPLE = """
- hosts: all
  tasks:
    - name: probe
      shell: echo "$(id -un) on {{ inventory_hostname }}"
"""


def test_unreachable_host_does_not_stop_others_and_exit_3(tmp_path: Path, sshd: PrivateSSHD) -> None:
    hosts = {"good": sshd.host_vars(), "refused": sshd.host_vars(port=free_port())}
    rc, out, ev = run(tmp_path, hosts, SIMPLE)
    assert rc == 3
    ends = {e["host"]: e for e in task_ends(ev)}
    assert ends["good"]["status"] == "changed"
    assert ends["refused"]["status"] == "unreachable"
    assert "connection refused" in ends["refused"]["msg"]
    assert "fatal: [refused]: UNREACHABLE!" in out


def test_silent_host_is_unreachable_after_connect_timeout(tmp_path: Path, sshd: PrivateSSHD) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)  # completes TCP handshakes, never speaks SSH
        port = silent.getsockname()[1]
        start = time.monotonic()
        rc, _out, ev = run(tmp_path, {"silent": sshd.host_vars(port=port, connect_timeout=1)}, SIMPLE)
        assert time.monotonic() - start < 10
    assert rc == 3
    assert task_ends(ev)[0]["status"] == "unreachable"


def test_host_key_checking(tmp_path: Path, sshd: PrivateSSHD) -> None:
    known = tmp_path / "known_hosts"
    rc, out, ev = run(tmp_path, {"h": sshd.host_vars(known_hosts_file=str(known))}, SIMPLE)
    assert rc == 3
    assert "unknown host key" in task_ends(ev)[0]["msg"]
    rc, out, ev = run(tmp_path, {"h": sshd.host_vars(known_hosts_file=str(known),
                                                     host_key_checking="accept-new")}, SIMPLE)
    assert rc == 0, out
    assert sshd.host_pub.split()[1] in known.read_text()
    rc, out, ev = run(tmp_path, {"h": sshd.host_vars(known_hosts_file=str(known))}, SIMPLE)
    assert rc == 0, out  # now known: strict accepts it
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")],
                           check=True)
    assert other.returncode == 0
    fake = (tmp_path / "other.pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{sshd.port} {fake[0]} {fake[1]}\n")
    for mode in ("strict", "accept-new"):
        rc, out, ev = run(tmp_path, {"h": sshd.host_vars(known_hosts_file=str(known),
                                                         host_key_checking=mode)}, SIMPLE)
        assert rc == 3
        assert "has CHANGED" in task_ends(ev)[0]["msg"]
    rc, out, ev = run(tmp_path, {"h": sshd.host_vars(known_hosts_file=str(known),
                                                     host_key_checking="off")}, SIMPLE)
    assert rc == 0


def test_authentication_failure_is_unreachable(tmp_path: Path, sshd: PrivateSSHD) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "wrong")], check=True)
    env_home = {"HOME": str(tmp_path)}  # no agent, no default keys that could be authorised
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(key_file=str(tmp_path / "wrong"))})
    pb = write_yaml(tmp_path / "pb.yml", SIMPLE)
    res = cli_subprocess("play", str(pb), "-i", str(inv), env={**env_home, "SSH_AUTH_SOCK": ""})
    assert res.rc == 3, res.out
    assert "authentication failed" in res.out.lower()


def test_one_connection_per_host_for_the_whole_run(tmp_path: Path, sshd: PrivateSSHD) -> None:
    hosts = {f"alias{i}": sshd.host_vars() for i in range(3)}  # three names, one address
    before = accepted_logins(sshd)
    rc, out, _ev = run(tmp_path, hosts, """
- hosts: all
  tasks:
    - {shell: "true"}
    - {shell: "true"}
    - {command: "true"}
    - {shell: "true", timeout: 5}
- hosts: all
  tasks:
    - {shell: "true"}
""")
    assert rc == 0, out
    assert wait_for(lambda: accepted_logins(sshd) - before == 3, 3), accepted_logins(sshd) - before


def test_twenty_hosts_in_parallel_each_its_own_result(tmp_path: Path, sshd: PrivateSSHD) -> None:
    hosts = {f"node{i:02d}": sshd.host_vars(slot=i) for i in range(20)}
    start = time.monotonic()
    rc, _out, ev = run(tmp_path, hosts, """
- hosts: all
  tasks:
    - name: work
      shell: sleep 1; echo "slot={{ slot }}"; exit {{ 1 if slot == 7 else 0 }}
      register: r
    - name: after
      assert:
        that: "r.stdout == 'slot=' ~ slot"
""", "--forks", "20")
    elapsed = time.monotonic() - start
    assert rc == 2
    work = {e["host"]: e for e in task_ends(ev, "work")}
    assert len(work) == 20
    for i in range(20):
        e = work[f"node{i:02d}"]
        assert e["stdout_tail"] == f"slot={i}"
        assert e["status"] == ("failed" if i == 7 else "changed")
    assert sorted(e["host"] for e in task_ends(ev, "after")) == sorted(h for h in hosts if h != "node07")
    assert all(e["status"] == "ok" for e in task_ends(ev, "after"))
    assert elapsed < 15  # 20 x 1 s in parallel, not in series


def test_ssh_config_alias(tmp_path: Path, sshd: PrivateSSHD) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host trainbox\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_file}\n")
    (home / ".ssh" / "known_hosts").write_text(sshd.known_hosts.read_text())
    inv = write_inventory(tmp_path / "inv.yml", {"trainbox": {}})
    pb = write_yaml(tmp_path / "pb.yml", SIMPLE)
    res = cli_subprocess("play", str(pb), "-i", str(inv), env={"HOME": str(home), "SSH_AUTH_SOCK": ""})
    assert res.rc == 0, res.out + res.err
    assert f"{sshd.user} on trainbox" in res.out or "changed: [trainbox]" in res.out


def test_vvv_shows_wrapped_command_as_sent(tmp_path: Path, sshd: PrivateSSHD) -> None:
    rc, out, _ev = run(tmp_path, {"h": sshd.host_vars(wrapper=[REAPER])}, """
- hosts: all
  tasks:
    - shell: echo "a'b"
""", "-vvv")
    assert rc == 0
    # The argv as sent (the script is not in it: it travels on stdin), then the script.
    # shell tasks run under the deadline watchdog (default_timeout): one outside the wrapper
    # chain, one inside; their source is abbreviated in the echo.
    assert (f"<h> SENT: python3 -S -c <opsrunner-watchdog> 3602 {REAPER} python3 -S -c <opsrunner-watchdog> "
            "3600 /bin/sh -c 'IFS= read -r opsrunner_n") in out
    assert "    script on stdin:\n    | echo \"a'b\"" in out


def test_reaper_wrapper_really_kills_naive_nohup(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    rc, out, _ = run(tmp_path, {"h": sshd.host_vars(wrapper=[REAPER])}, f"""
- hosts: all
  tasks:
    - shell:
        cmd: nohup sleep {cleanup_marker} >/dev/null 2>&1 & disown
        executable: /bin/bash
""")
    assert rc == 0, out
    time.sleep(1)
    assert pids_with(cleanup_marker) == []
    # Control: without the hostile wrapper the same naive launch survives.
    rc, out, _ev = run(tmp_path, {"h": sshd.host_vars()}, f"""
- hosts: all
  tasks:
    - shell:
        cmd: nohup sleep {cleanup_marker} >/dev/null 2>&1 & disown
        executable: /bin/bash
""")
    assert rc == 0
    time.sleep(1)
    assert len(pids_with(cleanup_marker)) == 1


def test_fd_holder_wrapper_really_hangs_naive_background(tmp_path: Path, sshd: PrivateSSHD,
                                                        cleanup_marker: str) -> None:
    # Control: the wrapper on its own waits as long as a naive background job lives.
    naive = f"sleep {cleanup_marker} >/dev/null 2>&1 &"
    with started([*FD_HOLDER.split(), "/bin/sh", "-c", naive]) as raw:
        try:
            raw.wait(3)
            raise AssertionError("fd_holder returned while the background job held fd 9")
        except subprocess.TimeoutExpired:
            pass
        finally:
            kill_marked(cleanup_marker)
            raw.wait(10)
    # Through opsrunner (no task timeout: the default deadline applies), the task ends at
    # once with a warning naming the job, which is killed.
    start = time.monotonic()
    rc, out, ev = run(tmp_path, {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])}, f"""
- hosts: all
  tasks:
    - name: naive
      shell: {naive}
""")
    elapsed = time.monotonic() - start
    end = task_ends(ev, "naive")[0]
    assert rc == 0 and end["status"] == "changed", out
    assert elapsed < 10, elapsed
    assert len(end["warnings"]) == 1 and f"(sleep {cleanup_marker})" in end["warnings"][0]
    assert "[WARNING]: [h] background process " in out and "launch_detached" in out
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_remote_timeout_kills_inside_wrapper_chain(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    start = time.monotonic()
    _rc, _out, ev = run(tmp_path, {"h": sshd.host_vars(wrapper=[REAPER, FD_HOLDER])}, f"""
- hosts: all
  tasks:
    - name: slow
      shell: sleep {cleanup_marker}
      timeout: 2
""")
    assert task_ends(ev, "slow")[0]["status"] == "timed_out"
    assert time.monotonic() - start < 10
    assert wait_for(lambda: not pids_with(cleanup_marker), 3)


def test_interrupt_kills_remote_command_with_a_timeout(tmp_path: Path, sshd: PrivateSSHD, cleanup_marker: str) -> None:
    """Ctrl-C closes the channel; the remote watchdog sees it and kills the command's tree."""
    inv = write_inventory(tmp_path / "inv.yml", {"h": sshd.host_vars(wrapper=[REAPER])})
    pb = write_yaml(tmp_path / "pb.yml", f"""
- hosts: all
  tasks:
    - shell: sleep {cleanup_marker}
      timeout: 600
""")
    # Ended by pid when the block ends, pass or fail (SIGINT may be ignored: a background shell).
    with opsrunner_process("play", str(pb), "-i", str(inv)) as proc:
        assert wait_for(lambda: bool(pids_with(cleanup_marker)), 15)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 99, out
    assert wait_for(lambda: not pids_with(cleanup_marker), 5), pids_with(cleanup_marker)


def test_the_transport_runs_on_the_dialed_socket(sshd: PrivateSSHD) -> None:
    """The ssh transport's socket is connections/tcp.py's (no Nagle, quick ACKs from the key
    exchange on: ~80 ms less per connection, see bench/RESULTS.md), and commands run on it."""
    from opsrunner.connections.base import ConnectionSpec
    from opsrunner.connections.ssh import SSHConnection
    from opsrunner.connections.tcp import QuickAckSocket

    conn = SSHConnection(ConnectionSpec(name="t", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                        key_file=str(sshd.key_file), known_hosts_file=str(sshd.known_hosts)))
    try:
        assert conn.run(["echo", "hello"]).stdout == "hello\n"
        assert conn._fabric is not None
        sock = conn._fabric.client.get_transport().sock
        assert isinstance(sock, QuickAckSocket)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert sock.getpeername() == ("127.0.0.1", sshd.port)
    finally:
        conn.close()


def _cipher_of(conn: object) -> str:
    fabric = conn._fabric  # type: ignore[attr-defined]
    assert fabric is not None
    return str(fabric.client.get_transport().local_cipher)


def test_the_transport_prefers_aes_gcm_and_still_connects_to_a_server_without_it(
        tmp_path: Path, sshd: PrivateSSHD) -> None:
    """AES-GCM first (one AEAD pass per packet, bench/RESULTS.md); a server that offers only
    AES-CTR gets AES-CTR, and commands run over it."""
    from opsrunner.connections.base import ConnectionSpec
    from opsrunner.connections.ssh import SSHConnection
    from tests.sshd import start_sshd

    ctr_only = start_sshd(tmp_path / "ctr-sshd", extra_config=("Ciphers aes128-ctr",))
    try:
        for server, cipher in ((sshd, "aes128-gcm@openssh.com"), (ctr_only, "aes128-ctr")):
            conn = SSHConnection(ConnectionSpec(
                name="t", host="127.0.0.1", port=server.port, user=server.user,
                key_file=str(server.key_file), known_hosts_file=str(server.known_hosts)))
            try:
                assert conn.run(["echo", "hello"]).stdout == "hello\n"
                assert conn.agent().call("read", {"paths": []}) is not None
                assert _cipher_of(conn) == cipher
            finally:
                conn.close()
    finally:
        ctr_only.stop()


def test_hosts_that_connect_at_once_parse_the_key_and_known_hosts_once(tmp_path: Path, sshd: PrivateSSHD) -> None:
    """One parse for every host connecting at the same moment. Each parsing for itself, 200
    hosts queued on the logging module's lock (paramiko asks for its logger on every line of
    known_hosts) and stalled a 200-host run's connections by ~10 s (bench/RESULTS.md)."""
    from opsrunner.connections import ssh
    from opsrunner.connections.base import ConnectionSpec

    line = sshd.known_hosts.read_text().split("\n")[0].split(" ", 1)[1]  # "<type> <key>"
    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts.read_text() + "".join(f"[10.9.{i // 250}.{i % 250}]:22 {line}\n"
                                                           for i in range(2000)))
    ssh._parsed_known_hosts.cache_clear()
    ssh._private_key.cache_clear()
    conns = [ssh.SSHConnection(ConnectionSpec(name=f"h{i}", host="127.0.0.1", port=sshd.port, user=sshd.user,
                                              key_file=str(sshd.key_file), known_hosts_file=str(known)))
             for i in range(8)]
    start = threading.Barrier(len(conns))

    def open_at_once(conn: ssh.SSHConnection) -> None:
        start.wait()
        conn.open()

    threads = [threading.Thread(target=open_at_once, args=(c,)) for c in conns]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [c.run(["echo", "up"]).stdout for c in conns] == ["up\n"] * len(conns)
        assert ssh._parsed_known_hosts.cache_info().misses == 1
        assert ssh._private_key.cache_info().misses == 1
    finally:
        for c in conns:
            c.close()
