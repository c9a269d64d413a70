"""What an unfinished run is in, as its history row keeps it (RunRow.current_task and
RunRow.in_flight): the task, its module and hosts, and what the module said it had done on
each host so far. A controller killed in the task leaves no result of it: this is what its
record, `show`, the dashboard and the alert then say it was in.

With the linear strategy every host is in the same task. With strategy free each host runs
its own: each host's task is kept (in_flight's `tasks`), a host leaves it when its result
comes, and the title names each task with its hosts where they differ (`a (h1); b (h2)`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opsrunner.events import TaskEnd, TaskProgress, TaskStart


@dataclass(frozen=True)
class _HostTask:
    """A task a host runs under strategy free: where it is written, and its title (masked)."""

    source: str
    handler: bool
    title: str
    module: str


class InFlight:
    """The run's task in flight. `title` and `record` are replaced whole on each change: the
    history's writer thread reads them, and an unchanged object is one it has written."""

    def __init__(self, mask: Callable[[str], str]) -> None:
        self.mask = mask
        self.title: str | None = None
        self.record: dict[str, Any] = {}
        self._free: dict[str, _HostTask] = {}
        self._so_far: dict[str, str] = {}

    def started(self, event: TaskStart) -> None:
        title = self.mask(event.task)
        if event.strategy != "free":
            self._free, self._so_far = {}, {}
            self.title = title
            self.record = {"module": event.module, "hosts": list(event.hosts), "so_far": {}}
            return
        for host in event.hosts:
            self._free[host] = _HostTask(event.source, event.handler, title, event.module)
            self._so_far.pop(host, None)
        self._free_changed()

    def progress(self, event: TaskProgress) -> bool:
        """What the task has done so far on a host; whether it is the task in flight there."""
        text = self.mask(event.text)
        if self._free:
            task = self._free.get(event.host)
            if task is None or (task.source, task.handler, task.module) != (event.source, event.handler,
                                                                            event.module):
                return False
            self._so_far[event.host] = text
            self._free_changed()
            return True
        if self.record.get("module") != event.module or self.title != self.mask(event.task):
            return False
        self.record = {**self.record, "so_far": {**self.record["so_far"], event.host: text}}
        return True

    def ended(self, event: TaskEnd) -> bool:
        """Under strategy free, a host's result: it is in no task until its next one starts.
        (A linear task stays the run's until the next starts: all hosts share it.)"""
        task = self._free.get(event.host)
        if task is None or (task.source, task.handler, task.module) != (event.source, event.handler, event.module):
            return False
        del self._free[event.host]
        self._so_far.pop(event.host, None)
        self._free_changed()
        return True

    def _free_changed(self) -> None:
        if not self._free:
            return  # between tasks, or done: the last task stays named until the run's end
        groups: dict[tuple[str, str], list[str]] = {}
        for host, task in self._free.items():
            groups.setdefault((task.title, task.module), []).append(host)
        self.title = next(iter(groups))[0] if len(groups) == 1 else "; ".join(
            f"{title} ({', '.join(hosts)})" for (title, _), hosts in groups.items())
        first = next(iter(self._free.values()))
        self.record = {"module": first.module, "hosts": list(self._free), "so_far": dict(self._so_far),
                       "tasks": {host: {"task": t.title, "module": t.module} for host, t in self._free.items()}}
