"""Creates the connection of each inventory host (here, so base.py imports no transport)."""

from __future__ import annotations

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

    def close_all(self) -> None:
        for conn in list(self._open.values()):
            conn.close()
        self._open.clear()
