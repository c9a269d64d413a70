"""What a run selects: its options, the hosts of each play, serial batches, tags."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from opsrunner.becomeopts import BecomeDefaults
from opsrunner.coercion import show_value
from opsrunner.connections.defaults import ConnectionDefaults
from opsrunner.connections.startslots import DEFAULT_START_SLOTS
from opsrunner.errors import Problem, SourcePos, TemplateError, ValidationError
from opsrunner.templating import LazyVars, is_template, render, template_value

if TYPE_CHECKING:
    from opsrunner.inventory import Inventory
    from opsrunner.playbook import Play, Task


class TaskConfirm(Protocol):
    """--step: asked before each task (its title, `TASK: name`); False skips it."""

    def confirm(self, title: str) -> bool: ...


@dataclass(frozen=True)
class HostSlice:
    """`--slice I/N`: the hosts whose name hashes to I (sha256 of the name, mod N, 1-based).

    A host's slice depends on its name and N only: the inventory's order, the other hosts,
    groups and plays never move it, so N controllers that each run one slice cover every
    selected host exactly once (docs/scale-out.md)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def selects(self, host: str) -> bool:
        return slice_of(host, self.count) == self.index


def slice_of(host: str, count: int) -> int:
    """The slice (1..count) that `host` belongs to."""
    return int.from_bytes(hashlib.sha256(host.encode()).digest()[:8], "big") % count + 1


_SLICE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_slice(text: str) -> HostSlice:
    """`I/N` with 1 <= I <= N; anything else is bad input (exit 4, before any host is touched)."""
    match = _SLICE.fullmatch(text)
    index, count = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not match or count < 1 or not 1 <= index <= count:
        why = "not I/N" if not match else "N must be at least 1" if count < 1 else f"I must be 1..{count}"
        raise ValidationError([Problem(SourcePos("command line"), f"--slice {text!r}: {why} (e.g. --slice 1/4: "
                                       "the first of 4 slices)", "--slice")])
    return HostSlice(index, count)


@dataclass
class RunOptions:
    """How to run a playbook: the command line's -C -D -l -t --skip-tags -f -e -v."""

    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    forks: int = 10
    #: --connect-slots: hosts starting their connection and agent at once (connections/startslots.py).
    connect_slots: int = DEFAULT_START_SLOTS
    #: --ssh-workers: processes holding the ssh connections (None: the run decides; sshworkers.py).
    ssh_workers: int | None = None
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbosity: int = 0
    force_handlers: bool = False
    #: The run's id in the history (`opsrunner_run_id` to tasks; lock holders name it).
    run_id: str | None = None
    #: --start-at-task: a task name or glob; tasks before the first it names are skipped (startat.py).
    start_at_task: str | None = None
    #: --step: confirms each task before it runs (None: no asking).
    step: TaskConfirm | None = None
    #: -u, --private-key, -c: used where a host's vars set none.
    connection: ConnectionDefaults = field(default_factory=ConnectionDefaults)
    #: This controller's share of the hosts (`--slice I/N`), or None: every host.
    host_slice: HostSlice | None = None
    #: -b, --become-user, --become-method, -K: defaults that plays and tasks override.
    become: BecomeDefaults = field(default_factory=BecomeDefaults)


def task_tags(task: Task, play: Play, extra_vars: Mapping[str, Any]) -> frozenset[str]:
    """The task's tags (its own and those it inherits) with templated ones rendered as
    ansible-core renders them: with the play's vars and -e, no host's (they select the
    play's tasks for every host). TemplateError or ValueError when one cannot be."""
    if not any(is_template(tag) for tag in task.tags):
        return task.tags  # nothing to render: the common case, per task and host
    variables = LazyVars([play.vars, extra_vars])
    return frozenset(name for tag in task.tags for name in _tag_names(tag, variables))


def _tag_names(tag: str, variables: LazyVars) -> list[str]:
    """One written tag's names: a template may render to one name or to a list of them."""
    value = render(tag, variables)
    names = value if isinstance(value, list) else [value]
    # ansible-core takes numbers as tag names too; null, a mapping or a nested list are none.
    if any(isinstance(n, bool) or not isinstance(n, str | int) for n in names):
        raise ValueError(f"{show_value(value)} is not a tag name nor a list of them")
    return [str(n).strip() for n in names if str(n).strip()]


def tags_problems(play: Play, extra_vars: Mapping[str, Any]) -> list[Problem]:
    """Templated tags of the play's tasks that name no tags: known before any host is touched
    (ansible-core fails on them when the play starts, even without -t or --skip-tags)."""
    variables = LazyVars([play.vars, extra_vars])
    problems = []
    for tag, pos in play.tag_pos.items():
        try:
            _tag_names(tag, variables)
        except (TemplateError, ValueError) as exc:
            why = exc.bare_message if isinstance(exc, TemplateError) else str(exc)
            problems.append(Problem(pos, f"tag {tag!r}: {why}", "tags"))
    return problems


def _batch_size(size: int | str, total: int) -> int:
    if isinstance(size, str) and size.endswith("%"):
        return max(1, math.floor(total * int(size[:-1]) / 100))
    return int(size) if int(size) > 0 else total


def serial_sizes(serial: Any) -> list[int | str]:
    """A rendered serial as its list of batch sizes ([] for none: one batch of every host);
    ValueError says why it is not one (a size that is no number, `abc%`, a mapping)."""
    if not serial:
        return []
    sizes = []
    for size in serial if isinstance(serial, list) else [serial]:
        text = size.strip() if isinstance(size, str) else size
        try:
            if isinstance(text, bool) or not isinstance(text, int | float | str):
                raise ValueError
            sizes.append(f"{int(text[:-1])}%" if isinstance(text, str) and text.endswith("%") else int(text))
        except ValueError:
            raise ValueError(f"{size!r} is not a number of hosts or a percentage of them "
                             "(e.g. 2 or '50%')") from None
    return sizes


def batches(hosts: list[str], serial: int | str | list[int | str] | None) -> list[list[str]]:
    """Ansible's serial: a size, a percentage of the play's hosts, or a list of them whose
    last one repeats (`[1, "50%"]`: one canary, then half of the hosts at a time)."""
    sizes = serial_sizes(serial)
    if not sizes:
        return [hosts]
    out: list[list[str]] = []
    start = 0
    while start < len(hosts):
        size = _batch_size(sizes[min(len(out), len(sizes) - 1)], len(hosts))
        out.append(hosts[start:start + size])
        start += size
    return out


def play_serial(play: Play, extra_vars: Mapping[str, Any]) -> list[int | str]:
    """The play's serial rendered as ansible-core renders it, with the play's vars and -e (no
    host's: it splits the hosts), and checked: TemplateError or ValueError when it cannot be."""
    return serial_sizes(template_value(play.serial, LazyVars([play.vars, extra_vars])))


def serial_problem(play: Play, extra_vars: Mapping[str, Any]) -> Problem | None:
    """A serial that cannot split the play's hosts: known before any host is touched."""
    try:
        play_serial(play, extra_vars)
    except (TemplateError, ValueError) as exc:
        why = exc.bare_message if isinstance(exc, TemplateError) else str(exc)
        return Problem(play.serial_pos or play.pos, f"bad serial {play.serial!r}: {why}", "serial")
    return None


def play_pattern(play: Play, extra_vars: Mapping[str, Any]) -> str:
    """The play's `hosts:` pattern, templated with -e vars."""
    return str(render(play.hosts, extra_vars))


def select_play_hosts(play: Play, inventory: Inventory, options: RunOptions, *, sliced: bool = True) -> list[str]:
    """The play's `hosts:` pattern (templated with -e vars), narrowed by --limit, then by
    --slice (unless `sliced` is False: what all the slices together run)."""
    hosts = inventory.select(play_pattern(play, options.extra_vars))
    if options.limit:
        allowed = set(inventory.select(options.limit))
        hosts = [h for h in hosts if h in allowed]
    if sliced and options.host_slice is not None:
        hosts = [h for h in hosts if options.host_slice.selects(h)]
    return hosts


def split_tags(values: Sequence[str]) -> frozenset[str]:
    """--tags/--skip-tags as given (repeated, comma-separated) as one set of tags."""
    return frozenset(t.strip() for v in values for t in v.split(",") if t.strip())
