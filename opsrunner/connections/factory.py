"""Creates the connection of each inventory host (here, so base.py imports no transport)."""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

from opsrunner.connections.base import CommandLogger, Connection, ConnectionSpec
from opsrunner.connections.startslots import DEFAULT_START_SLOTS, StartSlots

if TYPE_CHECKING:
    from opsrunner.connections.workerpool import WorkerPool


class ConnectionFactory:
    """Creates (and caches) one connection per inventory host for the whole run."""

    def __init__(self, log: CommandLogger | None = None, start_slots: int = DEFAULT_START_SLOTS) -> None:
        self.log = log
        self.slots = StartSlots(start_slots)
        self._open: dict[str, Connection] = {}
        self._workers: WorkerPool | None = None
        #: {inventory host: (why, told)} for job locks lost before the run let go of them, known
        #: once their connection closed (Connection.lost_job_locks).
        self.lost_job_locks: dict[str, tuple[str, bool]] = {}

    def start_workers(self, count: int) -> None:
        """Hold the ssh connections in `count` worker processes (workerpool.py), started now
        so that their start overlaps the run's own before the first host connects."""
        if count == 0:
            from opsrunner.connections import workerseed

            workerseed.discard()  # one started as the process started (workerseed.py), not needed
        if count > 0 and self._workers is None:
            from opsrunner.connections.workerpool import WorkerPool, WorkersFailed

            try:
                self._workers = WorkerPool(count)
            except WorkersFailed as exc:  # the connections stay in this process, as with --ssh-workers 0
                print(f"[WARNING]: {exc}: the ssh connections stay in the controller's process", file=sys.stderr)

    def get(self, spec: ConnectionSpec) -> Connection:
        conn = self._open.get(spec.name)
        if conn is None or conn.spec != spec:
            if conn is not None:
                self._close(conn)
            conn = self._create(spec)
            self._open[spec.name] = conn
        return conn

    def _create(self, spec: ConnectionSpec) -> Connection:
        if spec.kind == "local":
            from opsrunner.connections.local import LocalConnection

            return LocalConnection(spec, self.log, self.slots)
        if self._workers is not None:
            return self._workers.connection(spec, self.log, self.slots)
        # Imported only when a play reaches an ssh host: it imports paramiko.
        from opsrunner.connections.ssh import SSHConnection

        return SSHConnection(spec, self.log, self.slots)

    def close_all(self) -> None:
        """Close every connection, side by side, each on a thread of its own: a close waits
        (up to streams.AGENT_EXIT_WAIT_S) for its agent to exit, so the whole takes about the
        slowest one, whatever -f is; and an interrupted run's host threads may still be in
        commands that only the close ends."""
        self.slots.close()  # a host thread still waiting for its turn must not connect after this
        conns = list(self._open.values())
        self._open.clear()
        if len(conns) <= 1:
            for conn in conns:
                self._close(conn)
        else:
            closers = [threading.Thread(target=self._close, args=(conn,), name=f"close-{conn.spec.name}",
                                        daemon=True) for conn in conns]
            for closer in closers:
                closer.start()
            for closer in closers:
                closer.join()
        if self._workers is not None:
            self._workers.close()
            self._workers = None

    def _close(self, conn: Connection) -> None:
        conn.close()
        self.lost_job_locks.update(conn.lost_job_locks())
