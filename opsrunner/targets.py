"""Nothing to run is an error: a --limit or host patterns that leave no host to target."""

from __future__ import annotations

from opsrunner.errors import OpsrunnerError, Problem, TemplateError, ValidationError
from opsrunner.inventory import Inventory, PatternError
from opsrunner.playbook import Playbook
from opsrunner.preflight import hosts_problem
from opsrunner.selection import RunOptions, select_play_hosts


class NoHostsToTarget(OpsrunnerError):
    """ansible-core's "leaves us with no hosts to target", with its exit code 1."""

    exit_code = 1


def require_targets(playbook: Playbook, inventory: Inventory, options: RunOptions) -> str | None:
    """Evaluate every play's pattern (a broken one fails here, before any host is contacted, as
    bad input located in the playbook) and refuse a run in which no play has a host. A single
    play without hosts is skipped, as in Ansible.

    A --slice that leaves no host while the run as a whole has some is no error: N controllers
    run N slices whatever the number of hosts (a CI matrix, an Indexed Job), and a slice that
    happens to be empty did its share. The line saying so is returned, for the output."""
    if options.limit:
        inventory.select(options.limit)  # a bad --limit is the command line's mistake (exit 5), not the play's
    selected: list[list[str]] = []
    problems: list[Problem] = []
    for play in playbook.plays:
        try:
            selected.append(select_play_hosts(play, inventory, options))
        except (TemplateError, PatternError, ValueError) as exc:
            problems.append(hosts_problem(play, exc))
    if problems:
        raise ValidationError(problems)
    if playbook.plays and not any(selected) and options.host_slice is not None:
        whole = {h for play in playbook.plays for h in select_play_hosts(play, inventory, options, sliced=False)}
        if whole:
            return (f"slice {options.host_slice} selects none of the {len(whole)} host(s) of this run "
                    "(the other slices have them): nothing to do here")
    if playbook.plays and not any(selected):
        distinct = sorted({str(p.hosts) for p in playbook.plays})
        limit = f" and --limit {options.limit!r}" if options.limit else ""
        verb = "leave" if limit or len(distinct) > 1 else "leaves"  # "A and B leave", "A leaves"
        raise NoHostsToTarget(f"host pattern{'s' if len(distinct) > 1 else ''} {', '.join(distinct)!r}{limit} "
                              f"{verb} no hosts to target in {len(inventory.hosts)} inventory hosts; nothing was run")
    return None
