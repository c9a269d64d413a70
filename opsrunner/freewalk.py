"""strategy: free - each host of a batch runs its tasks as fast as it can (ansible-core's free).

No host waits for another between tasks: a fast host finishes the play while a slow one is
still on its first task. Only the tasks themselves run on the host pool; results are recorded,
hosts advanced and next tasks started on the engine's thread, so the run's state keeps one
writer as under linear. At most `forks` tasks run at once. As in ansible-core, run_once and
any_errors_fatal have no effect here (each host runs on its own), and the run says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from opsrunner.arrivals import Arrivals
from opsrunner.events import Notice
from opsrunner.iteration import HostIterator
from opsrunner.playbook import Play, Task
from opsrunner.results import TaskResult
from opsrunner.taskrun import TaskRunner, declined_result

#: Told each finished task on its host, on the engine's thread: advance the host, notify,
#: meta. An exception from it (the play ends or aborts) stops new tasks; those running finish.
Finished = Callable[[str, Task, TaskResult], None]


class FreeWalk:
    def __init__(self, runner: TaskRunner, play: Play, play_hosts: list[str], forks: int) -> None:
        self.runner = runner
        self.play = play
        self.play_hosts = play_hosts
        self.forks = max(1, forks)
        self._warned: set[int] = set()

    def walk(self, iters: dict[str, HostIterator], finished: Finished) -> None:
        if self.play.any_errors_fatal:
            self._notice("any_errors_fatal has no effect with strategy: free (as in ansible-core): "
                         "each host runs on its own")
        ready = deque(h for h, it in iters.items() if it.current is not None)
        running: dict[Future[TaskResult], tuple[str, Task]] = {}
        arrivals: Arrivals[TaskResult] = Arrivals()
        try:
            while ready or running:
                while ready and len(running) < self.forks:
                    host = ready.popleft()
                    task = iters[host].current
                    assert task is not None
                    if self.runner.declined(task, handler=False):  # --step: asked per host, as in ansible-core
                        finished(host, task, declined_result())
                        if iters[host].current is not None:
                            ready.append(host)
                        continue
                    self._warn_run_once(task)
                    running[arrivals.add(self.runner.start(self.play, task, host, self.play_hosts))] = (host, task)
                for future in arrivals.next_batch() if running else []:  # (all declined: none to wait for)
                    host, task = running.pop(future)
                    result = future.result()
                    self.runner.finish(self.play, task, host, result)
                    finished(host, task, result)
                    if iters[host].current is not None:
                        ready.append(host)
                self.runner.run.flush_reporters()
        except Exception:
            self._drain(running)
            raise

    def _drain(self, running: dict[Future[TaskResult], tuple[str, Task]]) -> None:
        """The play ends: the tasks still running finish and are recorded as what they did."""
        for future in list(running):
            host, task = running.pop(future)
            self.runner.finish(self.play, task, host, future.result())
        self.runner.run.flush_reporters()

    def _warn_run_once(self, task: Task) -> None:
        if task.kw("run_once") not in (None, False) and id(task) not in self._warned:
            self._warned.add(id(task))
            self._notice(f"{task.pos}: run_once has no effect with strategy: free (as in ansible-core): "
                         f"'{task.name}' runs on every host")

    def _notice(self, message: str) -> None:
        self.runner.run.emit(Notice(message))
