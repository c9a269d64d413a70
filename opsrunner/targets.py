"""Nothing to run is an error: a --limit or host patterns that leave no host to target."""

from __future__ import annotations

import contextlib
import difflib
import sys
from collections.abc import Mapping
from typing import Any

from opsrunner.errors import OpsrunnerError, Problem, TemplateError, ValidationError
from opsrunner.inventory import Inventory, PatternError, names_nothing, split_host_pattern
from opsrunner.playbook import Play, Playbook, iter_tasks
from opsrunner.preflight import hosts_problem
from opsrunner.selection import RunOptions, play_pattern, select_play_hosts, task_tags


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
    warnings = _limit_unmatched(inventory, options.limit) if options.limit else []
    selected: list[list[str]] = []
    problems: list[Problem] = []
    for play in playbook.plays:
        try:
            selected.append(select_play_hosts(play, inventory, options))
            warnings += _play_unmatched(play, inventory, options.extra_vars)
        except (TemplateError, PatternError, ValueError) as exc:
            problems.append(hosts_problem(play, exc))
    _warn(inventory, options.extra_vars, warnings + unknown_tags(playbook, options))
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
        # as ansible-core's "No inventory was parsed, only implicit localhost is available"
        implicit = ("" if not inventory.implicit else " (no inventory was read: none given with -i, and no "
                    "inventory/hosts.yml in the working directory or a project folder above it; only the "
                    "implicit localhost)")
        raise NoHostsToTarget(f"host pattern{'s' if len(distinct) > 1 else ''} {', '.join(distinct)!r}{limit} "
                              f"{verb} no hosts to target in {len(inventory.hosts)} inventory hosts{implicit}"
                              f"{_did_you_mean(inventory, playbook, options)}"
                              "; nothing was run")
    return None


def unmatched_terms(inventory: Inventory, pattern: str) -> list[str]:
    """The terms of a host pattern that name no host or group, which ansible-core ignores with
    a warning (`h1:nosuch` runs on h1), each once and without its `&` or `!`."""
    unmatched: dict[str, None] = {}
    for term in split_host_pattern(pattern):
        try:
            if names_nothing(inventory, term):
                unmatched[term.lstrip("&!")] = None
        except PatternError:
            continue  # told by the evaluation of the whole pattern
    return list(unmatched)


#: At most this many names offered; with more terms that match nothing, none (a list of hosts
#: in another domain, say: a guess per term is no help, and each costs a scan of the names).
SUGGESTIONS_MAX = 3


def _did_you_mean(inventory: Inventory, playbook: Playbook, options: RunOptions) -> str:
    """` (did you mean 'trainers'?)` for terms of the plays' patterns (as rendered) or of
    --limit that name nothing where a group or host is named almost so, and the run would have
    hosts with those names instead (an empty group, or one the other terms leave out, is no
    answer); else ""."""
    with contextlib.suppress(TemplateError, PatternError, ValueError):
        patterns = sorted({play_pattern(p, options.extra_vars) for p in playbook.plays})
        limit = options.limit or None
        unmatched = [term for pattern in [*patterns, *([limit] if limit else [])]
                     for term in unmatched_terms(inventory, pattern)
                     if f"!{term}" not in split_host_pattern(pattern)]  # leaving out a typo is no cause
        if len(unmatched) > 2 * SUGGESTIONS_MAX:
            return ""
        names = [*inventory.groups, *inventory.hosts]
        close = {term: _closest(term, names) for term in unmatched}
        said = {term: found[0] for term, found in close.items() if found}
        if not _would_target(inventory, patterns, limit, said):  # together they are no answer: one by one
            said = {term: name for term, found in close.items()
                    for name in found[:1] if _would_target(inventory, patterns, limit, {term: name})}
        shown = [f"{n!r} for {t!r}" if len(said) > 1 else repr(n) for t, n in list(said.items())[:SUGGESTIONS_MAX]]
        return f" (did you mean {', '.join(shown)}?)" if shown else ""
    return ""


def _closest(term: str, names: list[str]) -> list[str]:
    """The name closest to `term`, in a list, where one is (none where two are as close: which
    of gpu1 and gpu2 `gpu3` meant is a guess)."""
    found = difflib.get_close_matches(term, names, n=2, cutoff=0.75)
    ratios = [difflib.SequenceMatcher(None, term, name).ratio() for name in found]
    return found[:1] if len(found) < 2 or ratios[0] > ratios[1] else []


def _would_target(inventory: Inventory, patterns: list[str], limit: str | None, names: Mapping[str, str]) -> bool:
    """Whether the run would have a host with `names` ({term: name}) in place of those terms."""
    if not names:
        return False

    def swapped(pattern: str) -> str:
        return ":".join(("&" if t.startswith("&") else "") + names[t.lstrip("&")] if t.lstrip("&") in names else t
                        for t in split_host_pattern(pattern))

    narrowed = None if not limit else set(inventory.select(swapped(limit)))
    return any(narrowed is None or host in narrowed for p in patterns for host in inventory.select(swapped(p)))


_IGNORING = "Could not match supplied host pattern, ignoring:"


def _limit_unmatched(inventory: Inventory, limit: str) -> list[str]:
    """The warnings for the --limit terms that match nothing, when the limit as a whole
    matches something (one that matches nothing is refused)."""
    if not inventory.select(limit):
        return []
    return [f"{_IGNORING} {term} (in --limit {limit!r})" for term in unmatched_terms(inventory, limit)]


def _play_unmatched(play: Play, inventory: Inventory, extra_vars: Mapping[str, Any]) -> list[str]:
    """The warnings for the terms of a play's own `hosts:` that match nothing, whatever this
    run's --limit. A pattern that matches nothing as a whole is told otherwise: the play is
    skipped ("no hosts matched"), or the run refused when no play has a host."""
    pattern = play_pattern(play, extra_vars)
    if not inventory.select(pattern):
        return []
    where = play.hosts_pos or play.pos
    return [f"{_IGNORING} {term} (in hosts {pattern!r} of play {play.name!r} at {where})"
            for term in unmatched_terms(inventory, pattern)]


#: --tags names that select by a rule, not by a task's tag.
_SELECTORS = frozenset({"all", "tagged", "untagged"})
#: The most of the playbook's tags a warning lists.
TAGS_SHOWN = 12


def unknown_tags(playbook: Playbook, options: RunOptions) -> list[str]:
    """A warning per --tags / --skip-tags naming a tag no task has (a typo: ansible-core then
    runs the `always` tasks alone, silently), with the tags the playbook's tasks have."""
    if not options.tags and not options.skip_tags:
        return []
    known: set[str] = set()
    for play in playbook.plays:
        for task in iter_tasks(play.tasks):
            try:
                known |= task_tags(task, play, options.extra_vars)
            except (TemplateError, ValueError):
                continue  # bad input, told as such (tags_problems)
    listed = sorted(known - {"always"})
    shown = ", ".join(listed[:TAGS_SHOWN]) + (f", ... ({len(listed) - TAGS_SHOWN} more)"
                                              if len(listed) > TAGS_SHOWN else "")
    has = f"the playbook's tags: {shown}" if listed else "the playbook's tasks have no tags"
    warnings = []
    for flag, names in (("--tags", options.tags), ("--skip-tags", options.skip_tags)):
        unknown = sorted(names - known - _SELECTORS)
        if unknown:
            verb = "matches" if len(unknown) == 1 else "match"
            warnings.append(f"{flag} {', '.join(repr(t) for t in unknown)} {verb} no task; {has}")
    return warnings


def _warn(inventory: Inventory, extra_vars: Mapping[str, Any], warnings: list[str]) -> None:
    """ansible-core's warnings, once per run (here, where the run's targets are settled), on
    stderr, masked: a limit or a pattern from -e may hold a variable's secret value. The run
    goes on with the hosts the other terms match."""
    if not warnings:
        return
    from opsrunner.secrets import masker_for

    masker = masker_for(inventory, extra_vars)
    for text in warnings:
        sys.stderr.write(f"[WARNING]: {masker.mask(text)}\n")
