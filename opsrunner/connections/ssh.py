"""The SSH connection: opened through Fabric (ssh_config, ProxyJump, agent, keys), commands
run on raw paramiko channels of that one transport, over a socket dialed by tcp.py (no
Nagle delays, quick ACKs).

Fabric's `run` costs a stdin thread and Nagle delays per command; a bare channel on the
same transport costs one round trip. Importing this module imports paramiko, so the CLI
only imports it when a play actually reaches an ssh host.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import select
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import paramiko
from fabric import Config
from fabric import Connection as FabricConnection

from opsrunner.connections.base import Connection
from opsrunner.connections.local import BACKUP_GRACE_S
from opsrunner.connections.startslots import StartsClosed
from opsrunner.connections.streams import (
    AGENT_EXIT_WAIT_S,
    StderrTail,
    Stream,
    feed_stdin,
    split_warnings,
    strip_timeout_marker,
)
from opsrunner.connections.tcp import dial
from opsrunner.errors import ConnectionFailed
from opsrunner.results import CommandResult

# paramiko's transport thread logs tracebacks (e.g. a peer that closes before the banner);
# the failure reaches the user as `unreachable` with its reason, so the log stays quiet.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

_known_hosts_lock = threading.Lock()
#: After the remote command's exit status arrives, how long to keep reading output that
#: a background child still holds open before giving up on it.
HELD_OUTPUT_GRACE_S = 2.0

_config_lock = threading.Lock()
#: Held while a key file or known_hosts file is looked up in its cache (and parsed on a miss):
#: hosts that connect at once wait for one parse instead of each parsing. 200 threads each
#: parsing a 200-line known_hosts queued on the logging module's lock (paramiko asks for its
#: logger on every line) and stalled a 200-host run's connections by ~10 s, one run in five.
_parse_lock = threading.Lock()
_ssh_config: paramiko.SSHConfig | None = None


def _config() -> Config:
    """The Fabric settings of one connection: its own Config object over the ssh_config files
    parsed once per run.

    Not a shared Config (invoke's Config merges lazily on attribute access and is not safe
    to share between threads: with 200 hosts opening at once one was seen empty mid-merge),
    and not clones of one either (a clone deep-copies ~25,000 objects, serialised under the
    GIL: 0.8 s of waiting at 50 hosts). The parsed ssh_config is only read, by lookup()."""
    global _ssh_config
    with _config_lock:
        if _ssh_config is None:
            _ssh_config = Config().base_ssh_config
    return Config(ssh_config=_ssh_config)


def _stamp(path: str) -> tuple[float, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime, st.st_size


@functools.lru_cache(maxsize=32)
def _private_key(path: str, stamp: tuple[float, int] | None) -> paramiko.PKey | None:
    """A key file parsed once per run for every host that uses it (paramiko parses it per
    connection, trying each key type). None (paramiko then reads the file itself, as before)
    when it needs a passphrase or cannot be read here."""
    try:
        return paramiko.PKey.from_path(path)
    except (OSError, paramiko.SSHException, ValueError, AttributeError):
        return None


@functools.lru_cache(maxsize=32)
def _parsed_known_hosts(path: str, stamp: tuple[float, int] | None) -> paramiko.HostKeys:
    return paramiko.HostKeys(path)


def _load_known_hosts(into: paramiko.HostKeys, path: Path) -> None:
    """A known_hosts file parsed once per run (and again if it changes), copied into each
    client: decoding every key per connection cost ~10 ms a host at 50 hosts."""
    with _parse_lock:
        parsed = _parsed_known_hosts(str(path), _stamp(str(path)))
    entries = getattr(parsed, "_entries", None)
    if isinstance(entries, list) and isinstance(getattr(into, "_entries", None), list):
        into._entries.extend(entries)  # entries are never mutated: sharing them is safe
    else:
        into.load(str(path))


class _AcceptNew(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    """Like OpenSSH's accept-new: record unknown keys (appending), refuse changed ones."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        with _known_hosts_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with self.path.open("a", encoding="ascii") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


#: Ciphers tried first: AES-GCM seals a packet in one AEAD call where AES-CTR needs a second
#: pass for its HMAC (~40 us of controller CPU less per agent call, bench/RESULTS.md).
_AEAD_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _aead_first_transport(sock: Any, **kwargs: Any) -> paramiko.Transport:
    """paramiko's transport with AES-GCM ahead of its other ciphers (the client's order picks
    the cipher); a server without AES-GCM gets paramiko's usual choice."""
    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    known = tuple(options.ciphers)
    options.ciphers = tuple(c for c in _AEAD_CIPHERS if c in known) + tuple(c for c in known if c not in _AEAD_CIPHERS)
    return transport


def _hops(fab: FabricConnection) -> list[FabricConnection]:
    """The ProxyJump connections in front of `fab`, nearest to the target first."""
    hops = []
    hop = fab.gateway
    while isinstance(hop, FabricConnection):
        hops.append(hop)
        hop = hop.gateway
    return hops


def _failed_hop(hops: list[FabricConnection]) -> str | None:
    """The hop where connecting stopped (the hop furthest from the target opens first)."""
    for hop in reversed(hops):
        if not hop.is_connected:
            return f"ProxyJump hop [{hop.host}]:{hop.port}"
    return None


def _tried(fab: FabricConnection, hops: list[FabricConnection]) -> str:
    """The TCP connection where connecting stopped, as Ansible's `connect to host H port P`
    says it: the first connection not open, in the order they open (the hop furthest from the
    target first, then each hop from the one before it, the target last), and the hop it was
    tried from."""
    chain = [*reversed(hops), fab]
    for i, conn in enumerate(chain):
        if conn is fab or not conn.is_connected:
            what = "host" if conn is fab else "ProxyJump hop"
            via = f" through ProxyJump hop [{chain[i - 1].host}]:{chain[i - 1].port}" if i else ""
            return f"{what} {conn.host} port {conn.port}{via}"
    return "host"  # not reached: the target is last


def _reason(exc: BaseException, spec_host: str, timeout: float, tried: str = "host") -> str:
    """Why connecting failed; one that never reached an ssh server names the address tried."""
    if isinstance(exc, StartsClosed):
        return str(exc)
    if isinstance(exc, paramiko.BadHostKeyException):
        return (f"host key for {spec_host} has CHANGED (expected {exc.expected_key.get_name()}); "
                "refusing to connect: remove the old key from known_hosts if the change is expected")
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed: {exc}"
    unknown = re.match(r"Server '(.*)' not found in known_hosts", str(exc))
    if isinstance(exc, paramiko.SSHException) and unknown:
        return (f"unknown host key for {unknown.group(1)} (host_key_checking=strict; the same policy "
                "applies to every ProxyJump hop): add it to known_hosts (ssh-keyscan) or set "
                "host_key_checking: accept-new")
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"connect to {tried}: connection timed out after {timeout:g}s"
    if isinstance(exc, ConnectionRefusedError | paramiko.ssh_exception.NoValidConnectionsError):
        return f"connect to {tried}: connection refused"
    if isinstance(exc, socket.gaierror):
        return f"connect to {tried}: cannot resolve host: {exc.strerror}"
    if isinstance(exc, paramiko.ChannelException):  # the hop before it could not connect to it
        return f"connect to {tried}: the hop could not connect ({exc.text or f'code {exc.code}'})"
    return f"connect to {tried}: {type(exc).__name__}: {exc}"


class SSHConnection(Connection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fabric: FabricConnection | None = None
        self._lock = threading.Lock()
        self._channels: set[paramiko.Channel] = set()

    # -- connect ----------------------------------------------------------------------------
    def open(self) -> None:
        with self._lock:
            if self._fabric is not None and self._fabric.is_connected:
                return
            spec = self.spec
            connect_kwargs: dict[str, Any] = {"banner_timeout": spec.connect_timeout,
                                              "auth_timeout": spec.connect_timeout}
            if spec.key_file:
                path = str(Path(spec.key_file).expanduser())
                with _parse_lock:
                    key = _private_key(path, _stamp(path))
                connect_kwargs["pkey" if key is not None else "key_filename"] = key or [path]
            fab = FabricConnection(
                host=spec.host or spec.name, user=spec.user, port=spec.port, config=_config(),
                connect_timeout=int(max(1, spec.connect_timeout)), connect_kwargs=connect_kwargs,
            )
            self._configure_host_keys(fab.client)
            fab.connect_kwargs = dict(fab.connect_kwargs, transport_factory=_aead_first_transport)
            # ProxyJump hops (from ssh_config) are Fabric connections of their own, which
            # would auto-add any key: every hop gets the same host-key policy.
            hops = _hops(fab)
            for hop in hops:
                self._configure_host_keys(hop.client)
                hop.connect_kwargs = dict(hop.connect_kwargs, transport_factory=_aead_first_transport)
            # The connection that reaches its host over TCP itself (the target, or the first
            # ProxyJump hop) gets a socket dialed here: tcp.py says why. A ProxyCommand has none.
            direct = hops[-1] if hops else fab
            sock = None
            try:
                with self.slots.held():  # connect_timeout counts from this host's turn (startslots.py)
                    if direct.gateway is None:
                        sock = dial(direct.host, direct.port, direct.connect_timeout)
                        direct.connect_kwargs = dict(direct.connect_kwargs, sock=sock)
                    fab.open()
            except Exception as exc:
                where, tried = _failed_hop(hops) or spec.host or spec.name, _tried(fab, hops)  # before the closes
                for conn in (fab, *hops):
                    with contextlib.suppress(Exception):
                        conn.close()
                if sock is not None:
                    sock.close()
                raise ConnectionFailed(_reason(exc, where, spec.connect_timeout, tried)) from None
            fab.client.get_transport().set_keepalive(15)
            self._fabric = fab

    def _configure_host_keys(self, client: paramiko.SSHClient) -> None:
        mode = self.spec.host_key_checking
        known = Path(self.spec.known_hosts_file or "~/.ssh/known_hosts").expanduser()
        if mode == "off":
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            return
        if known.exists():
            _load_known_hosts(client.get_host_keys(), known)
        system = Path("/etc/ssh/ssh_known_hosts")
        if system.exists() and self.spec.known_hosts_file is None:
            with contextlib.suppress(OSError):
                client.load_system_host_keys(str(system))
        if mode == "accept-new":
            client.set_missing_host_key_policy(_AcceptNew(known))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())

    def close(self) -> None:
        self._close_agent()
        with self._lock:
            for chan in list(self._channels):
                with contextlib.suppress(Exception):
                    chan.close()
            if self._fabric is not None:
                with contextlib.suppress(Exception):
                    self._fabric.close()
            self._fabric = None

    def session_lost(self) -> bool:
        fabric = self._fabric
        transport = fabric.client.get_transport() if fabric is not None else None
        return transport is not None and _transport_lost(transport)

    # -- commands ---------------------------------------------------------------------------
    def _execute(self, argv: Sequence[str], stdin: bytes | IO[bytes] | None,
                 timeout: float | None) -> CommandResult:
        command = shlex.join(argv)
        self.open()  # connecting is not part of the command's time
        start = time.monotonic()
        chan = self._open_channel(command)
        with self._lock:
            self._channels.add(chan)
        try:
            return self._collect(chan, command, stdin, timeout, start)
        finally:
            with self._lock:
                self._channels.discard(chan)
            chan.close()

    def _spawn(self, argv: Sequence[str]) -> Stream:
        return _ChannelStream(self._open_channel(shlex.join(argv)))

    def _open_channel(self, command: str) -> paramiko.Channel:
        self.open()
        assert self._fabric is not None
        try:
            chan = self._fabric.client.get_transport().open_session(timeout=self.spec.connect_timeout)
            chan.exec_command(command)
        except Exception as exc:
            self.close()
            raise ConnectionFailed(f"ssh channel failed: {exc}") from None
        return chan

    def _collect(self, chan: paramiko.Channel, command: str, stdin: bytes | IO[bytes] | None,
                 timeout: float | None, start: float) -> CommandResult:
        feeder = None
        if stdin is None:
            chan.shutdown_write()
        else:
            feeder = threading.Thread(target=feed_stdin, args=(chan.sendall, chan.shutdown_write, stdin),
                                      daemon=True)
            feeder.start()
        out: list[bytes] = []
        err: list[bytes] = []
        backup = None if timeout is None else start + timeout + BACKUP_GRACE_S
        forced = False
        exit_seen: float | None = None
        while True:
            now = time.monotonic()
            if backup is not None and now > backup:
                forced = True
                break
            select.select([chan], [], [], 0.5)
            while chan.recv_ready():
                out.append(chan.recv(1 << 16))
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(1 << 16))
            if chan.eof_received and chan.exit_status_ready() \
                    and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            if chan.closed and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            if chan.exit_status_ready():
                exit_seen = exit_seen or now
                if now - exit_seen > HELD_OUTPUT_GRACE_S:
                    err.append(b"\n[opsrunner] output still held open by a background process; "
                               b"stopped reading\n")
                    break
        if feeder:
            feeder.join(timeout=1)
        rc = chan.recv_exit_status() if chan.exit_status_ready() else -1
        stderr, marked = strip_timeout_marker(b"".join(err))
        stderr, warnings = split_warnings(stderr)
        if rc == -1 and not forced and _session_lost(chan):
            raise ConnectionFailed("ssh session lost while the command ran")
        timed_out = forced or (marked and rc == 124)
        return CommandResult(command, rc, b"".join(out), stderr, time.monotonic() - start, timed_out, warnings)


class _ChannelStream(Stream):
    """A command on its own channel of the host's transport, as a Stream."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan
        self.tail = StderrTail()

    def send(self, data: bytes) -> None:
        self.chan.settimeout(None)
        if self.chan.closed:
            raise EOFError("the agent's channel is closed")
        try:
            self.chan.sendall(data)
        except paramiko.SSHException as exc:
            raise OSError(f"ssh: {exc}") from None

    def recv(self, size: int, timeout: float | None) -> bytes:
        self.chan.settimeout(timeout)
        try:
            data: bytes = self.chan.recv(size)
        except TimeoutError:
            raise
        except paramiko.SSHException as exc:
            raise OSError(f"ssh: {exc}") from None
        return data

    def close(self, wait_exit: bool = False) -> bool:
        # At the run's end: EOF on the agent's stdin, and its exit status comes back, so that the
        # run's agents are gone, not going, when it returns (a lost transport sets the status
        # event too). Otherwise, or after that: closing the channel closes the agent's stdin on
        # the host and ends the chain (the outer watchdog stops one that hangs).
        with contextlib.suppress(Exception):
            if wait_exit and not self.chan.closed:
                self.chan.shutdown_write()
                self.chan.status_event.wait(AGENT_EXIT_WAIT_S)
        exited = bool(self.chan.status_event.is_set())  # its exit status came: the chain has ended
        with contextlib.suppress(Exception):
            self.chan.close()
        return exited

    def alive(self) -> bool:
        return not (self.chan.closed or self.chan.eof_received or self.chan.exit_status_ready())

    def exit_text(self) -> str:
        with contextlib.suppress(Exception):
            while self.chan.recv_stderr_ready():
                self.tail.add(self.chan.recv_stderr(1 << 16))
        if self.chan.exit_status_ready():
            how = f"exit status {self.chan.recv_exit_status()}"
        else:
            how = "connection lost" if self.chan.closed else "no exit status"
        tail = self.tail.text()
        return f"{how}: {tail}" if tail else how


def _session_lost(chan: paramiko.Channel) -> bool:
    """No exit status came: was the connection lost (rather than the command killed by a
    signal, which sshd reports as exit-signal and paramiko as -1)?"""
    transport = chan.get_transport()
    return transport is None or _transport_lost(transport)


def _transport_lost(transport: paramiko.Transport) -> bool:
    deadline = time.monotonic() + 1.0
    while transport.is_active() and time.monotonic() < deadline:
        time.sleep(0.05)  # the transport notices EOF on its socket just after the channels close
    return not transport.is_active()
