"""Walking a play's tasks for one host, blocks included: where the host goes next.

Each host has its own position (a host whose block failed goes to the rescue tasks while
the others go on); the engine runs, in document order, the next task of each host, so
hosts stay in lockstep as in Ansible's linear strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

from opsrunner.playbook import Block, Node, Task
from opsrunner.results import Status, TaskResult

Walk = Generator[Task, TaskResult, None]


class HostFailed(Exception):
    """The host's current task failed (not ignored): leave the enclosing block."""


def _walk(nodes: Sequence[Node], selected: Callable[[Task], bool], on_rescue: Callable[[], None]) -> Walk:
    for node in nodes:
        if isinstance(node, Block):
            yield from _walk_block(node, selected, on_rescue)
        elif selected(node):
            result = yield node
            if node.include_marker and result.status == Status.SKIPPED:
                return  # the include_tasks was skipped: so are its tasks, unseen
            if result.failed and not result.ignored:
                if result.status == Status.UNREACHABLE and not result.ignored:
                    return  # an unreachable host stops here: no rescue, no always
                raise HostFailed


def _walk_block(block: Block, selected: Callable[[Task], bool], on_rescue: Callable[[], None]) -> Walk:
    error: HostFailed | None = None
    try:
        yield from _walk(block.block, selected, on_rescue)
    except HostFailed as exc:
        if block.rescue:
            on_rescue()
            try:
                yield from _walk(block.rescue, selected, on_rescue)
            except HostFailed as again:
                error = again
        else:
            error = exc
    yield from _walk(block.always, selected, on_rescue)
    if error is not None:
        raise error


class HostIterator:
    """The next task of one host; `advance` hands it the result of the current one."""

    def __init__(self, nodes: Sequence[Node], selected: Callable[[Task], bool],
                 on_rescue: Callable[[], None]) -> None:
        self._walk = _walk(nodes, selected, on_rescue)
        self.current: Task | None = None
        self._step(None)

    def _step(self, result: TaskResult | None) -> None:
        try:
            self.current = next(self._walk) if result is None else self._walk.send(result)
        except (StopIteration, HostFailed):
            self.current = None

    def advance(self, result: TaskResult) -> None:
        self._step(result)
        if result.status == Status.UNREACHABLE and not result.ignored:
            self.current = None

    def fail(self) -> None:
        """Fail the host where it stands (any_errors_fatal): its blocks' rescue and always run."""
        if self.current is None:
            return
        try:
            self.current = self._walk.throw(HostFailed())
        except (StopIteration, HostFailed):
            self.current = None

    def stop(self) -> None:
        self.current = None
        self._walk.close()
