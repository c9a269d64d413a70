"""connections/tcp.py's dial: the socket under every ssh transport. Real sockets on 127.0.0.1;
getaddrinfo is replaced only to list several addresses for one name (pure logic)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from paramiko.ssh_exception import NoValidConnectionsError

from opsrunner.connections import tcp
from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.ssh import SSHConnection
from opsrunner.errors import ConnectionFailed
from tests.sshd import free_port


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(5)
        yield server


def _addresses(monkeypatch: pytest.MonkeyPatch, ports: list[int]) -> None:
    infos = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)) for port in ports]
    monkeypatch.setattr(tcp.socket, "getaddrinfo", lambda *_args: infos)


def test_the_socket_sends_at_once_and_acknowledges_what_it_reads(listener: socket.socket) -> None:
    sock = tcp.dial("127.0.0.1", listener.getsockname()[1], 5.0)
    peer, _ = listener.accept()
    with sock, peer:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        peer.sendall(b"SSH-2.0-test\r\n")
        assert sock.recv(100) == b"SSH-2.0-test\r\n"
        if tcp._QUICKACK is not None:  # Linux reports 1 while acknowledging at once
            assert sock.getsockopt(socket.IPPROTO_TCP, tcp._QUICKACK) == 1
        peer.close()
        assert sock.recv(100) == b""


def test_a_refused_address_is_skipped_for_the_next(monkeypatch: pytest.MonkeyPatch,
                                                   listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    _addresses(monkeypatch, [free_port(), port])
    with tcp.dial("name-with-two-addresses", port, 5.0) as sock:
        assert sock.getpeername() == ("127.0.0.1", port)


def test_every_address_refused_is_paramikos_error_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    ports = [free_port(), free_port()]
    _addresses(monkeypatch, ports)
    with pytest.raises(NoValidConnectionsError) as caught:
        tcp.dial("name-with-two-addresses", ports[0], 5.0)
    assert set(caught.value.errors) == {("127.0.0.1", port) for port in ports}


def test_a_name_that_does_not_resolve_is_reported_as_such(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The resolver's error reaches the user as paramiko's did (no lookup leaves the machine:
    getaddrinfo answers as a resolver does for an unknown name)."""
    def unknown_name(*_args: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(tcp.socket, "getaddrinfo", unknown_name)
    conn = SSHConnection(ConnectionSpec(name="gpu-7", host="gpu-7.example", port=22, user="root",
                                        known_hosts_file=str(tmp_path / "known_hosts")))
    with pytest.raises(ConnectionFailed, match="cannot resolve host: Name or service not known"):
        conn.open()


def test_a_name_that_does_not_resolve_is_named_with_its_port(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def unknown_name(*_args: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(tcp.socket, "getaddrinfo", unknown_name)
    conn = SSHConnection(ConnectionSpec(name="gpu-7", host="gpu-7.example", port=2201, user="root",
                                        known_hosts_file=str(tmp_path / "known_hosts")))
    with pytest.raises(ConnectionFailed) as caught:
        conn.open()
    assert str(caught.value) == ("connect to host gpu-7.example port 2201: cannot resolve host: "
                                 "Name or service not known")
