"""Creates the connection of each inventory host (here, so base.py imports no transport)."""

from __future__ import annotations

from concurrent.futures import Executor

from opsrunner.connections.base import CommandLogger, Connection, ConnectionSpec


class ConnectionFactory:
    """Creates (and caches) one connection per inventory host for the whole run."""

    def __init__(self, log: CommandLogger | None = None) -> None:
        self.log = log
        self._open: dict[str, Connection] = {}

    def get(self, spec: ConnectionSpec) -> Connection:
        conn = self._open.get(spec.name)
        if conn is None or conn.spec != spec:
            if conn is not None:
                conn.close()
            conn = self._create(spec)
            self._open[spec.name] = conn
        return conn

    def _create(self, spec: ConnectionSpec) -> Connection:
        if spec.kind == "local":
            from opsrunner.connections.local import LocalConnection

            return LocalConnection(spec, self.log)
        # Imported only when a play reaches an ssh host: it imports paramiko.
        from opsrunner.connections.ssh import SSHConnection

        return SSHConnection(spec, self.log)

    def close_all(self, pool: Executor | None = None) -> None:
        """Close every connection; with `pool` (idle threads: the run is over), side by side:
        a close sends messages behind the other hosts' transport threads, ~2 ms each in turn."""
        conns = list(self._open.values())
        self._open.clear()
        if pool is not None and len(conns) > 1:
            list(pool.map(lambda conn: conn.close(), conns))
            return
        for conn in conns:
            conn.close()
