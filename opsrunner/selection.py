"""What a run selects: its options, the hosts of each play, serial batches, tags."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opsrunner.becomeopts import BecomeDefaults
from opsrunner.templating import render

if TYPE_CHECKING:
    from opsrunner.inventory import Inventory
    from opsrunner.playbook import Play


@dataclass
class RunOptions:
    """How to run a playbook: the command line's -C -D -l -t --skip-tags -f -e -v."""

    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    forks: int = 10
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbosity: int = 0
    force_handlers: bool = False
    #: The run's id in the history (`opsrunner_run_id` to tasks; lock holders name it).
    run_id: str | None = None
    #: -b, --become-user, --become-method, -K: defaults that plays and tasks override.
    become: BecomeDefaults = field(default_factory=BecomeDefaults)


def tags_selected(task_tags: frozenset[str], tags: frozenset[str], skip: frozenset[str]) -> bool:
    """Ansible's rules, including the special tags `always` and `never`."""
    if task_tags & skip or ("always" in task_tags and "always" in skip):
        return False
    if "never" in task_tags and not (task_tags & (tags - {"all"})):
        return False
    if not tags or "all" in tags:
        return True
    if "always" in task_tags:
        return True
    if "tagged" in tags and task_tags:
        return True
    if "untagged" in tags and not task_tags:
        return True
    return bool(task_tags & tags)


def _batch_size(serial: int | str, total: int) -> int:
    if isinstance(serial, str) and serial.endswith("%"):
        return max(1, math.floor(total * int(serial[:-1]) / 100))
    size = int(serial)
    return size if size > 0 else total


def batches(hosts: list[str], serial: int | str | list[int | str] | None) -> list[list[str]]:
    """Ansible's serial: a size, a percentage of the play's hosts, or a list of them whose
    last one repeats (`[1, "50%"]`: one canary, then half of the hosts at a time)."""
    if not serial:
        return [hosts]
    sizes = serial if isinstance(serial, list) else [serial]
    out: list[list[str]] = []
    start = 0
    while start < len(hosts):
        size = _batch_size(sizes[min(len(out), len(sizes) - 1)], len(hosts))
        out.append(hosts[start:start + size])
        start += size
    return out


def select_play_hosts(play: Play, inventory: Inventory, options: RunOptions) -> list[str]:
    """The play's `hosts:` pattern (templated with -e vars), narrowed by --limit."""
    hosts = inventory.select(str(render(play.hosts, options.extra_vars)))
    if options.limit:
        allowed = set(inventory.select(options.limit))
        hosts = [h for h in hosts if h in allowed]
    return hosts
