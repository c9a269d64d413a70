"""The engine: plays x batches x tasks x hosts (Ansible's linear strategy, or free), handlers, events.

The engine is a library: it takes a loaded Playbook and Inventory, emits events to
reporters, and returns a RunSummary. It prints nothing itself. A run's state lives in a
PlayRun (playrun.py); running one task on its hosts is the TaskRunner's (taskrun.py);
what a run selects (hosts, batches, tags) is selection.py's. Most callers want
opsrunner.api.run, which loads the files, records history and takes the locks around it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from opsrunner import idle, interrupts
from opsrunner.errors import TemplateError, Terminated, ValidationError
from opsrunner.events import Notice, PlayEnd, PlayStart, Recap, Reporter, TaskEnd, TaskStart
from opsrunner.freewalk import FreeWalk
from opsrunner.handlers import Notifications
from opsrunner.inventory import Inventory
from opsrunner.iteration import HostIterator
from opsrunner.playbook import Play, Playbook, Task, iter_tasks
from opsrunner.playrun import PlayRun
from opsrunner.preflight import run_preflight
from opsrunner.results import RunSummary, Status, TaskResult
from opsrunner.secrets import Masker, masker_for
from opsrunner.selection import (
    RunOptions,
    batches,
    play_serial,
    select_play_hosts,
    serial_problem,
    task_tags,
)
from opsrunner.sshworkers import planned_workers
from opsrunner.startat import StartAt
from opsrunner.tagrules import tags_selected
from opsrunner.taskrun import TaskRunner, started_pool, switch_interval_for

__all__ = ["Engine", "RunOptions"]

#: The task a job lock lost before the run let go of it is reported under, where no task
#: result on its host said so (the lock lapsed after the host's last task, or ignore_unreachable).
LOST_LOCK_TASK = "job lock (end of run)"


class _PlayAborted(Exception):
    """Stop the run: any_errors_fatal, max_fail_percentage."""


class _PlayEnded(Exception):
    """meta: end_play - the play ends for every host; the run goes on with the next play."""


class Engine:
    """Runs a loaded playbook over an inventory; one Engine, one PlayRun."""

    def __init__(self, playbook: Playbook, inventory: Inventory, options: RunOptions,
                 reporters: Sequence[Reporter] = (), masker: Masker | None = None,
                 report_in_flight: bool = False) -> None:
        self.state = PlayRun(playbook, inventory, options, list(reporters),
                             masker if masker is not None else masker_for(inventory, options.extra_vars),
                             report_in_flight=report_in_flight)
        self.playbook = playbook
        self.inventory = inventory
        self.options = options
        self.summary = self.state.summary
        self.emit = self.state.emit
        self._runner: TaskRunner | None = None
        self._play_hosts: list[str] = []
        self._start_at = StartAt(options.start_at_task)
        #: ids of the tasks --start-at-task skips in the current play; None: the whole play.
        self._skipped: frozenset[int] | None = frozenset()

    @property
    def runner(self) -> TaskRunner:
        assert self._runner is not None, "tasks run only inside run()"
        return self._runner

    # -- run --------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run the playbook. Raises ValidationError (nothing run) when preflight fails the same
        way on every host: then the mistake is in the files or the command line."""
        play_hosts = [select_play_hosts(p, self.inventory, self.options) for p in self.playbook.plays]
        every_host = (h for hosts in play_hosts for h in hosts)
        self.state.connections.start_workers(planned_workers(self.options.ssh_workers, self.inventory, every_host,
                                                             self.options.connection))
        try:  # from here the run's connections end with it (_run_plays closes them)
            report = run_preflight(self.playbook, play_hosts, self.state.vars, self._selected, self.state.masker,
                                   self.state.checked_args)
            if report.static_problems():
                raise ValidationError(report.static_problems())
            self.state.preflight = report.problems
            workers = min(max(1, self.options.forks), max([1, *(len(h) for h in play_hosts)]))
            pool = started_pool(workers)
        except BaseException:
            self.state.connections.close_all()  # the ssh workers started above, if any
            raise
        self._runner = TaskRunner(self.state, pool)
        with switch_interval_for(workers), interrupts.so_far_told_to(self.state.task_progress):
            self._run_plays(pool)
        self._report_lost_locks()
        self.emit(Recap(self.summary))
        return self.summary

    def _run_plays(self, pool: ThreadPoolExecutor) -> None:
        try:
            for play in self.playbook.plays:
                go_on = self._run_play(play)
                self.emit(PlayEnd(play.name, self._play_hosts, run_id=self.options.run_id))
                if not go_on:
                    break
        except KeyboardInterrupt as exc:
            self.summary.interrupted = True
            self.summary.signal = exc.signal_name if isinstance(exc, Terminated) else "SIGINT"
            self.state.interrupted()  # the tasks it cut short: recorded as such, on their hosts
            self.emit(Notice(f"interrupted ({self.summary.signal}): stopping in-flight commands"))
        except BaseException:
            with contextlib.suppress(Exception):  # the reporting put off before the error (idle.py)
                idle.run()
            raise
        finally:
            # Interrupted (or failed), host threads may still be in commands that only the close ends.
            self.state.connections.close_all()
            pool.shutdown(wait=not self.summary.interrupted, cancel_futures=True)

    def _report_lost_locks(self) -> None:
        """Job locks that went before the run let go of them, where no task result on that host
        counted it unreachable (found only as the run's connections closed: a lease that ran
        out after the host's last task; or told to a task that ignore_unreachable let pass):
        a result of the task LOST_LOCK_TASK on that host, UNREACHABLE, as any task's (the
        recap, the exit code, the history's task rows and a schedule's alert have it)."""
        lost = {host: why for host, (why, told) in self.state.connections.lost_job_locks.items()
                if not told or not self.summary.host(host).unreachable}
        if not lost:
            return
        play = self.playbook.plays[-1].name if self.playbook.plays else ""
        self.emit(TaskStart(play, LOST_LOCK_TASK, "job_lock", sorted(lost)))
        for host, why in sorted(lost.items()):
            result = TaskResult(Status.UNREACHABLE, msg=why)
            self.summary.host(host).count(result)
            self.emit(TaskEnd(play, LOST_LOCK_TASK, "job_lock", host, result))

    def _run_play(self, play: Play) -> bool:
        """Run one play; False means stop the whole run (any_errors_fatal, all failed, ...)."""
        hosts = [h for h in select_play_hosts(play, self.inventory, self.options) if h not in self.state.dead]
        self._play_hosts = hosts
        self.emit(PlayStart(play.name, hosts, run_id=self.options.run_id))
        if not hosts:
            self.emit(Notice(f"skipping play '{play.name}': no hosts matched"))
            return True
        for host in hosts:
            self.summary.host(host)
        self._skipped = self._start_at.skipped_in(play, iter_tasks(play.tasks))
        if not self._fail_preflight(play, hosts):
            return False
        try:
            plan = batches(hosts, play_serial(play, self.options.extra_vars))
        except (TemplateError, ValueError):  # preflight refuses it first (exit 4): only a safety net
            self._fail_serial(play, hosts)
            return False
        for batch in plan:
            try:
                self._run_batch(play, batch, hosts)
            except _PlayAborted:
                return False
            except _PlayEnded:
                return True
            if all(h in self.state.dead for h in batch):
                self.emit(Notice(f"every host of the batch failed: stopping the run in play '{play.name}'"))
                return False
        return True

    def _fail_preflight(self, play: Play, hosts: list[str]) -> bool:
        """Fail, untouched, the hosts whose preflight found problems; False stops the run."""
        bad = [h for h in hosts if h in self.state.preflight]
        if not bad:
            return True
        self.emit(TaskStart(play.name, "preflight", "preflight", bad, False, str(play.pos)))
        for host in bad:
            # Each as it may be shown: an -e position hides a secret-named value as the command line does.
            problems = [self.state.masker.mask_problem(p) for p in self.state.preflight.pop(host)]
            result = TaskResult(Status.FAILED, msg=f"preflight: {len(problems)} problem(s), nothing was run "
                                "on this host:\n" + "\n".join(f"  {p}" for p in problems))
            self.state.record(play, Task("preflight", "preflight", {}, play.pos, {}), host, result, False)
        self.state.flush_reporters()  # failed hosts: recorded at once, not with the next task's results
        if play.any_errors_fatal:
            self.emit(Notice(f"any_errors_fatal: {', '.join(bad)} failed preflight; stopping the run"))
            return False
        if all(h in self.state.dead for h in hosts):
            self.emit(Notice(f"every host failed preflight: stopping the run in play '{play.name}'"))
            return False
        return True

    def _fail_serial(self, play: Play, hosts: list[str]) -> None:
        """A serial that cannot split the hosts fails each of them, untouched, with the reason
        recorded as a task's (the recap, `opsrunner show` and the history name it)."""
        problem = serial_problem(play, self.options.extra_vars)
        why = str(problem) if problem else f"bad serial {play.serial!r}"
        self.emit(TaskStart(play.name, "serial", "serial", hosts, False, str(play.serial_pos or play.pos)))
        task = Task("serial", "serial", {}, play.serial_pos or play.pos, {})
        for host in hosts:
            self.state.record(play, task, host, TaskResult(Status.FAILED, msg=f"{why}; nothing was run on this host"),
                              False)
        self.state.flush_reporters()

    def _run_batch(self, play: Play, batch: list[str], play_hosts: list[str]) -> None:
        self.state.batch = batch
        notes = Notifications(play.handlers)
        skipped = self._skipped
        iters = {h: HostIterator(play.tasks if skipped is not None else (),
                                 lambda t: id(t) not in (skipped or ()) and self._selected(t, play), self._rescuer(h))
                 for h in batch if h not in self.state.dead}
        if play.gather_facts and skipped is not None:
            self._gather_facts(play, [h for h in batch if h in iters], play_hosts, iters)
        if play.strategy == "free":
            self._walk_free(play, batch, play_hosts, iters, notes)
            fatal = False
        else:
            fatal = self._walk_linear(play, batch, play_hosts, iters, notes)
        if fatal and any(h in self.state.dead for h in batch):
            self.emit(Notice("any_errors_fatal: a host failed; stopping the run"))
            raise _PlayAborted
        self._flush(play, batch, play_hosts, notes)

    def _walk_linear(self, play: Play, batch: list[str], play_hosts: list[str],
                     iters: dict[str, HostIterator], notes: Notifications) -> bool:
        """strategy linear: each task runs on every host that reaches it before the next starts.
        True when any_errors_fatal was triggered."""
        order = {id(t): i for i, t in enumerate(iter_tasks(play.tasks))}
        fatal = False
        while True:
            # A failed host's walk ends at its failure, except that `always` tasks still run.
            waiting = {h: it.current for h, it in iters.items() if it.current is not None}
            if not waiting:
                break
            task = min(waiting.values(), key=lambda t: order[id(t)])
            hosts = [h for h in batch if waiting.get(h) is task]
            results = self.runner.step(play, task, hosts, play_hosts)
            for host, result in results.items():
                iters[host].advance(result)
                if result.changed and not result.failed:
                    notes.notify(task.notify, host)
            if task.module == "meta":
                self._meta(play, batch, play_hosts, results, iters, notes)
            fatal = self._check_abort(play, batch, results, iters) or fatal
        return fatal

    def _walk_free(self, play: Play, batch: list[str], play_hosts: list[str],
                   iters: dict[str, HostIterator], notes: Notifications) -> None:
        """strategy free (freewalk.py): each host goes on to its next task as soon as it can."""

        def finished(host: str, task: Task, result: TaskResult) -> None:
            iters[host].advance(result)
            if result.changed and not result.failed:
                notes.notify(task.notify, host)
            if task.module == "meta":
                self._meta(play, [host], play_hosts, {host: result}, iters, notes)
            self._check_max_fail(play, batch)

        FreeWalk(self.runner, play, play_hosts, self.options.forks).walk(iters, finished)

    def _gather_facts(self, play: Play, hosts: list[str], play_hosts: list[str],
                      iters: dict[str, HostIterator]) -> None:
        """gather_facts: true - the setup module first, as ansible-core's "Gathering Facts"."""
        task = Task(name="Gathering Facts", module="setup", args={}, pos=play.pos, keywords={},
                    base_dir=play.base_dir)
        for host, result in self.runner.task(play, task, hosts, play_hosts, handler=False).items():
            if result.failed:
                iters[host].stop()

    def _flush(self, play: Play, batch: list[str], play_hosts: list[str],
               notes: Notifications) -> None:
        force = self.options.force_handlers or play.force_handlers

        def eligible(host: str) -> bool:
            return host not in self.state.dead or (force and not self.summary.host(host).unreachable)

        notes.flush(lambda handler, hosts: self.runner.task(play, handler, hosts, play_hosts, handler=True),
                    batch, eligible)

    def _meta(self, play: Play, batch: list[str], play_hosts: list[str],
              results: dict[str, TaskResult], iters: dict[str, HostIterator], notes: Notifications) -> None:
        acting = [h for h, r in results.items() if r.data.get("meta") and not r.failed]
        action = next((results[h].data["meta"] for h in acting), None)
        if action == "flush_handlers":
            self._flush(play, batch, play_hosts, notes)
        elif action == "end_host":
            for host in acting:
                iters[host].stop()
                notes.forget(host)
        elif action == "end_play":
            self.emit(Notice(f"meta: end_play: ending play '{play.name}'"))
            raise _PlayEnded

    def _selected(self, task: Task, play: Play) -> bool:
        try:
            tags = task_tags(task, play, self.options.extra_vars)
        except (TemplateError, ValueError):  # preflight refuses them first (exit 4): only a safety net
            return True
        return tags_selected(tags, self.options.tags, self.options.skip_tags)

    def _rescuer(self, host: str) -> Callable[[], None]:
        """Called when a block's rescue takes over a failure: Ansible counts it as rescued."""

        def rescued() -> None:
            if host in self.state.forced:  # another host's fatal failure: nothing of its own to rescue
                self.state.forced.discard(host)
                return
            stats = self.summary.host(host)
            stats.failed -= 1
            stats.rescued += 1
            self.state.dead.discard(host)
            if host in self.state.failures:
                task, result = self.state.failures[host]
                self.state.vars.register(host, "ansible_failed_task", {"name": task.name, "action": task.module})
                self.state.vars.register(host, "ansible_failed_result", result.registered())

        return rescued

    def _check_abort(self, play: Play, batch: list[str], results: dict[str, TaskResult],
                     iters: dict[str, HostIterator]) -> bool:
        """True when any_errors_fatal was triggered: every other host of the batch fails where it
        stands (its rescue and always sections run, as in ansible-core); the caller stops the run
        once the batch has walked them unless every failure was rescued."""
        failed = [h for h, r in results.items() if r.failed and not r.ignored]  # rescued or not
        if failed and play.any_errors_fatal:
            for host, walk in iters.items():
                if host not in failed and walk.current is not None:
                    self.state.forced.add(host)
                    walk.fail()
                    self.state.forced.discard(host)
            return True
        self._check_max_fail(play, batch)
        return False

    def _check_max_fail(self, play: Play, batch: list[str]) -> None:
        if play.max_fail_percentage is not None and batch:
            pct = 100.0 * sum(1 for h in batch if h in self.state.dead) / len(batch)
            if pct > play.max_fail_percentage:
                self.emit(Notice(f"max_fail_percentage {play.max_fail_percentage:g}% exceeded "
                                 f"({pct:.0f}% of the batch failed); stopping the run"))
                raise _PlayAborted
