"""The command line's connection defaults: -u/--user, --private-key, -c/--connection.

As in ansible-playbook, each is a default: a host's own `user`/`ansible_user`, `key_file`/
`ansible_ssh_private_key_file` and `connection`/`ansible_connection` (host, group or
group_vars) win over it. -c applies to every host that sets no connection, localhost too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from opsrunner.errors import Problem, SourcePos

#: The connection types opsrunner has (connections/factory.py).
CONNECTION_KINDS = ("local", "ssh")


@dataclass(frozen=True)
class ConnectionDefaults:
    user: str | None = None
    key_file: str | None = None
    connection: str | None = None

    def problems(self) -> list[Problem]:
        """What is wrong with them, found before any host is touched (exit 4)."""
        found = []
        if self.key_file is not None and not Path(self.key_file).expanduser().is_file():
            found.append(Problem(SourcePos("<--private-key>"), f"private key file not found: {self.key_file}"))
        if self.connection is not None and self.connection not in CONNECTION_KINDS:
            found.append(Problem(SourcePos("<--connection>"), f"unknown connection type '{self.connection}' "
                                 f"(opsrunner has: {', '.join(CONNECTION_KINDS)})"))
        return found
