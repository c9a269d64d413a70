"""Handlers: which hosts notified which handler (by name or `listen` topic), and flushing.

As in ansible-core, a handler runs once per flush for the hosts that notified it, in the
order the handlers are defined, and a handler that changes something may notify others,
which run in the same flush.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opsrunner.playbook import Task
from opsrunner.results import TaskResult

RunHandler = Callable[[Task, list[str]], dict[str, TaskResult]]


def listen_topics(handler: Task) -> list[str]:
    value = handler.kw("listen") or []
    return [value] if isinstance(value, str) else [str(v) for v in value]


class Notifications:
    """Pending notifications of one batch of hosts."""

    def __init__(self, handlers: Sequence[Task]) -> None:
        self.handlers = list(handlers)
        self._pending: dict[int, set[str]] = {}

    def notify(self, names: Sequence[str], host: str) -> None:
        for name in names:
            for index, handler in enumerate(self.handlers):
                if handler.name == name or name in listen_topics(handler):
                    self._pending.setdefault(index, set()).add(host)

    def forget(self, host: str) -> None:
        """A host that left the play (meta: end_host) runs none of its pending handlers."""
        for hosts in self._pending.values():
            hosts.discard(host)

    def flush(self, run: RunHandler, order: Sequence[str], eligible: Callable[[str], bool]) -> None:
        """Run every pending handler, in definition order, until none is pending."""
        wanted = set(order)  # strategy free flushes one host's handlers: the others' stay pending
        while True:
            index = next((i for i in sorted(self._pending) if self._pending[i] & wanted), None)
            if index is None:
                return
            notified = self._pending[index] & wanted
            self._pending[index] -= notified
            hosts = [h for h in order if h in notified and eligible(h)]
            if not hosts:
                continue
            handler = self.handlers[index]
            for host, result in run(handler, hosts).items():
                if result.changed and not result.failed:
                    self.notify(handler.notify, host)
