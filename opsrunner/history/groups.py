"""Run groups: the slices of one logical run (`play --slice I/N`), tied by one id.

The id is `--run-group`, else $OPSRUNNER_RUN_GROUP, else, for a sliced run only, one that
all N controllers of one logical run compute alike without talking to each other:
- in GitHub Actions: `<playbook>-github-<GITHUB_RUN_ID>-<GITHUB_RUN_ATTEMPT>` (every job of a
  matrix shares the workflow run's id; a re-run is a new attempt, a new group);
- in GitLab CI: `<playbook>-gitlab-<CI_PIPELINE_ID>`;
- elsewhere: `<playbook>-<N>slices-<UTC date>`: slices of one playbook started the same day.
An unsliced run without one has no group.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsrunner.history.store import RunRow
    from opsrunner.selection import HostSlice


def run_group_for(given: str | None, host_slice: HostSlice | None, playbook: str | Path,
                  env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    chosen = (given or env.get("OPSRUNNER_RUN_GROUP") or "").strip()
    if chosen or host_slice is None:
        return chosen or None
    stem = Path(playbook).stem
    if env.get("GITHUB_RUN_ID"):
        return f"{stem}-github-{env['GITHUB_RUN_ID']}-{env.get('GITHUB_RUN_ATTEMPT', '1')}"
    if env.get("CI_PIPELINE_ID"):
        return f"{stem}-gitlab-{env['CI_PIPELINE_ID']}"
    return f"{stem}-{host_slice.count}slices-{time.strftime('%Y%m%d', time.gmtime())}"


@dataclass(frozen=True)
class GroupSummary:
    """What the history holds of a run group."""

    group: str
    runs: int
    #: The slices recorded ("1/4", "3/4"), and N where the runs were sliced.
    slices: tuple[str, ...]
    slice_count: int | None
    hosts: int
    #: Hosts recorded by more than one run of the group (a slice run twice, or overlapping).
    repeated_hosts: tuple[str, ...]

    def describe(self) -> str:
        if self.slice_count:
            part = f"{len(set(self.slices))} of {self.slice_count} slices recorded ({', '.join(self.slices)})"
        else:
            part = f"{self.runs} run(s), not sliced"
        again = f"; run more than once: {', '.join(self.repeated_hosts)}" if self.repeated_hosts else ""
        return f"{part}, {self.hosts} host(s){again}"


def summarize(group: str, runs: list[RunRow]) -> GroupSummary:
    seen: dict[str, int] = {}
    for run in runs:
        for host in run.hosts:
            seen[host] = seen.get(host, 0) + 1
    slices = tuple(sorted({r.slice for r in runs if r.slice}, key=lambda s: int(s.split("/")[0])))
    counts = {int(s.split("/")[1]) for s in slices}
    return GroupSummary(group, len(runs), slices, max(counts) if counts else None, len(seen),
                        tuple(sorted(h for h, n in seen.items() if n > 1)))
