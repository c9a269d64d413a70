"""How many ssh worker processes a run starts (connections/workerpool.py says what they do).

`--ssh-workers N` says it; without it the run decides. Measured (bench/RESULTS.md, run 27): on
16 cores a 50-host restart is faster with 4-8 workers; on 2 cores, where the targets' sshd and
agents share the controller's cores, one process is faster. So by default a run has none
below AUTO_MIN_CORES cores or AUTO_MIN_HOSTS ssh hosts, and else a worker per
AUTO_HOSTS_PER_WORKER hosts, at most half the cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from opsrunner.errors import Problem, SourcePos

if TYPE_CHECKING:  # types only: the CLI reads AUTO_MIN_CORES before it imports the rest
    from opsrunner.connections.defaults import ConnectionDefaults
    from opsrunner.inventory import Inventory

#: The default of --ssh-workers where a run does not give it (a scheduler's unit, say).
ENV_VAR = "OPSRUNNER_SSH_WORKERS"

AUTO_MIN_CORES = 8
AUTO_MIN_HOSTS = 16
AUTO_HOSTS_PER_WORKER = 6


def workers_wanted(given: int | None, env: Mapping[str, str]) -> tuple[int | None, Problem | None]:
    """--ssh-workers, else $OPSRUNNER_SSH_WORKERS, else None (the run decides); with the problem
    of a value that is not a whole number of at least 0 (bad input: exit 4)."""
    where, key, text = "command line", "--ssh-workers", None if given is None else str(given)
    if text is None and env.get(ENV_VAR, "").strip():
        where, key, text = "environment", ENV_VAR, env[ENV_VAR].strip()
    if text is None:
        return None, None
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        return None, Problem(SourcePos(where), f"{key} {text}: must be a whole number, 0 (the connections "
                             "stay in this process) or more", key)
    return count, None


def auto_workers(ssh_hosts: int, cores: int) -> int:
    if cores < AUTO_MIN_CORES or ssh_hosts < AUTO_MIN_HOSTS:
        return 0
    return max(2, min(cores // 2, ssh_hosts // AUTO_HOSTS_PER_WORKER))


def likely_ssh(inventory: Inventory, host: str, defaults: ConnectionDefaults) -> bool:
    """Whether the host's connection is ssh, as far as its inventory vars say before any
    templating (a templated value counts as ssh): enough to decide on workers."""
    kind = None
    for layer in inventory.var_layers(host):
        for key in ("connection", "ansible_connection"):
            if key in layer:
                kind = layer[key]
    if kind is None:
        kind = defaults.connection or ("local" if host in ("localhost", "127.0.0.1") else "ssh")
    return str(kind) != "local"


def usable_cores() -> int:
    """The cores this process may use (a container's share), not the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def planned_workers(requested: int | None, inventory: Inventory, hosts: Iterable[str],
                    defaults: ConnectionDefaults) -> int:
    """`requested` (--ssh-workers), or the automatic choice for these hosts on this machine."""
    if requested is not None:
        return requested
    cores = usable_cores()
    if cores < AUTO_MIN_CORES:
        return 0
    return auto_workers(sum(likely_ssh(inventory, h, defaults) for h in set(hosts)), cores)
