"""The TCP connection under an ssh transport, dialed here rather than by paramiko, so that two
waits built into the start of every OpenSSH connection do not happen (measured on 127.0.0.1:
connecting 65-70 ms -> 26-32 ms, the first channel 43 ms -> 2 ms):

- Our own Nagle algorithm: the key exchange and the authentication send small packets back
  to back, and each second one waited for the server's ACK of the first, which the server
  delays. paramiko sets no TCP_NODELAY; the socket here has it from the start.
- The server's Nagle algorithm until the first command: sshd sets TCP_NODELAY only when a
  session starts one. Right after authentication it sends its host keys
  (hostkeys-00@openssh.com) and then the answer to our channel open; that answer waited for
  our ACK of the host keys, which Linux delays up to 40 ms when it has nothing to send with
  it. This socket acknowledges what it reads at once (TCP_QUICKACK, which Linux clears
  again by itself, so it is set after every read).
"""

from __future__ import annotations

import contextlib
import errno
import socket
from typing import Any

from paramiko.ssh_exception import NoValidConnectionsError

_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


class QuickAckSocket(socket.socket):
    """A TCP socket that acknowledges every read at once (Linux; elsewhere a plain socket)."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        if data and _QUICKACK is not None:
            with contextlib.suppress(OSError):
                self.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        return data


def dial(host: str, port: int, timeout: float | None) -> socket.socket:
    """A connected socket to host:port, with TCP_NODELAY and quick ACKs. The same attempts and
    errors as paramiko's own connect (SSHClient.connect): every stream address the name
    resolves to, in order; a refused or unreachable one is skipped, any other error raised;
    NoValidConnectionsError when none answered."""
    infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    candidates = [(info[0], info[4]) for info in infos if info[1] == socket.SOCK_STREAM] \
        or [(info[0], info[4]) for info in infos]
    errors: dict[Any, OSError] = {}  # keyed by address, as paramiko's message reads it
    for family, address in candidates:
        sock = QuickAckSocket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            sock.close()
            if exc.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                raise
            errors[address] = exc
            continue
        return sock
    raise NoValidConnectionsError(errors)
