"""Nothing to run is an error: a --limit or host patterns that leave no host to target."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from opsrunner.errors import OpsrunnerError, Problem, TemplateError, ValidationError
from opsrunner.inventory import Inventory, PatternError, split_host_pattern
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
    # A bad --limit is the command line's mistake (exit 5), not the play's; one that matches
    # nothing at all is refused below, one with terms that match nothing is warned about.
    if options.limit and inventory.select(options.limit):
        _warn_unmatched(inventory, options.limit, options.extra_vars)
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


def unmatched_terms(inventory: Inventory, pattern: str) -> list[str]:
    """The terms of a host pattern that match no host, which ansible-core ignores with a warning
    (`h1:nosuch` runs on h1)."""
    unmatched = []
    for term in split_host_pattern(pattern):
        try:
            if not inventory.select(term.lstrip("&!")):
                unmatched.append(term.lstrip("&!"))
        except PatternError:
            continue  # told by the evaluation of the whole pattern
    return unmatched


def _warn_unmatched(inventory: Inventory, limit: str, extra_vars: Mapping[str, Any]) -> None:
    """ansible-core's warning for each --limit term that matches no host, once per run (here,
    where the run's targets are settled), on stderr, masked: a limit may hold a variable's
    secret value. The run goes on with the hosts the other terms match."""
    terms = unmatched_terms(inventory, limit)
    if not terms:
        return
    from opsrunner.secrets import masker_for

    masker = masker_for(inventory, extra_vars)
    for term in terms:
        text = f"Could not match supplied host pattern, ignoring: {term} (in --limit {limit!r})"
        sys.stderr.write(f"[WARNING]: {masker.mask(text)}\n")
