"""Engine events. Reporters subscribe to these; the engine knows nothing about output."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from opsrunner.results import RunSummary, TaskResult


@dataclass(frozen=True)
class PlayStart:
    play: str
    hosts: list[str]
    time: float = field(default_factory=time.time)
    #: The run's history row (None when the run is not recorded).
    run_id: str | None = None


@dataclass(frozen=True)
class PlayEnd:
    """A play is over (its hosts ran every task they were to run, or the run stops after it)."""

    play: str
    hosts: list[str]
    time: float = field(default_factory=time.time)
    run_id: str | None = None


@dataclass(frozen=True)
class TaskStart:
    play: str
    task: str
    module: str
    hosts: list[str]
    handler: bool = False
    source: str = ""
    time: float = field(default_factory=time.time)
    #: "free": the task starts on its hosts one at a time and results of tasks interleave.
    strategy: str = "linear"


@dataclass(frozen=True)
class TaskEnd:
    play: str
    task: str
    module: str
    host: str
    result: TaskResult
    handler: bool = False
    time: float = field(default_factory=time.time)
    #: Where the task is written (TaskStart's `source`): with strategy free, results of
    #: several tasks interleave, and this says which task a result belongs to.
    source: str = ""


@dataclass(frozen=True)
class TaskProgress:
    """What a task running on a host has done there so far, in words, as its module says it
    after each of its steps (interrupts.so_far: a rollback's stop and relaunch, then its
    verify): the history keeps it, so the record of a controller killed in the task says it."""

    play: str
    task: str
    module: str
    host: str
    text: str
    handler: bool = False
    time: float = field(default_factory=time.time)
    source: str = ""


class TaskTitles:
    """The title each started task was shown with (templated with its first host's vars), for
    its results: a TaskEnd names the task as written. Under strategy free the results of several
    tasks interleave, so the title is looked up by where the task is written."""

    def __init__(self) -> None:
        #: by (source, handler, host): a free task starts on each host with that host's title;
        #: host "" for a task started on its hosts together (titled with the first host's vars).
        self._titles: dict[tuple[str, bool, str], str] = {}

    def started(self, event: TaskStart) -> None:
        host = event.hosts[0] if event.strategy == "free" and len(event.hosts) == 1 else ""
        self._titles[(event.source, event.handler, host)] = event.task

    def knows(self, event: TaskEnd) -> bool:
        """Whether the task of this result was started here (on its host, or on all)."""
        return ((event.source, event.handler, event.host) in self._titles
                or (event.source, event.handler, "") in self._titles)

    def title(self, event: TaskEnd) -> str:
        found = self._titles.get((event.source, event.handler, event.host))
        return found if found is not None else self._titles.get((event.source, event.handler, ""), event.task)


@dataclass(frozen=True)
class CommandSent:
    host: str
    command: str
    time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Notice:
    message: str
    host: str = ""
    time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Recap:
    summary: RunSummary
    time: float = field(default_factory=time.time)


Event = PlayStart | PlayEnd | TaskStart | TaskEnd | TaskProgress | CommandSent | Notice | Recap


class Reporter(Protocol):
    def handle(self, event: Event) -> None: ...

    def flush(self) -> None:
        """Make what was handled so far visible (the engine calls it when it waits on hosts:
        task results arriving together are then written together)."""

    def close(self) -> None: ...
