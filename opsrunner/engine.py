"""The engine: plays x batches x tasks x hosts (Ansible's linear strategy), handlers, events.

The engine is a library: it takes a loaded Playbook and Inventory, emits events to
reporters, and returns a RunSummary. It prints nothing itself.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from opsrunner.connections.factory import ConnectionFactory
from opsrunner.errors import Problem, TemplateError, Terminated, ValidationError
from opsrunner.events import CommandSent, Event, Notice, PlayStart, Recap, Reporter, TaskEnd, TaskStart
from opsrunner.executor import TaskExecutor
from opsrunner.hostvars import VariableManager, connection_spec
from opsrunner.inventory import Inventory
from opsrunner.iteration import HostIterator
from opsrunner.ledger import CheckLedger
from opsrunner.playbook import Play, Playbook, Task, iter_tasks
from opsrunner.preflight import run_preflight
from opsrunner.results import RunSummary, Status, TaskResult
from opsrunner.secrets import masker_for, no_log_enabled
from opsrunner.templating import LazyVars, mark_unsafe, render


@dataclass
class RunOptions:
    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: frozenset[str] = frozenset()
    skip_tags: frozenset[str] = frozenset()
    forks: int = 10
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbosity: int = 0


def tags_selected(task_tags: frozenset[str], tags: frozenset[str], skip: frozenset[str]) -> bool:
    """Ansible's rules, including the special tags `always` and `never`."""
    if task_tags & skip or ("always" in task_tags and "always" in skip):
        return False
    if "never" in task_tags and not (task_tags & (tags - {"all"})):
        return False
    if not tags or "all" in tags:
        return True
    if "always" in task_tags:
        return True
    if "tagged" in tags and task_tags:
        return True
    if "untagged" in tags and not task_tags:
        return True
    return bool(task_tags & tags)


def batches(hosts: list[str], serial: int | str | None) -> list[list[str]]:
    if not serial:
        return [hosts]
    if isinstance(serial, str) and serial.endswith("%"):
        size = max(1, math.floor(len(hosts) * int(serial[:-1]) / 100))
    else:
        size = int(serial)
    if size <= 0:
        return [hosts]
    return [hosts[i:i + size] for i in range(0, len(hosts), size)]


def select_play_hosts(play: Play, inventory: Inventory, options: RunOptions) -> list[str]:
    """The play's `hosts:` pattern (templated with -e vars), narrowed by --limit."""
    hosts = inventory.select(str(render(play.hosts, options.extra_vars)))
    if options.limit:
        allowed = set(inventory.select(options.limit))
        hosts = [h for h in hosts if h in allowed]
    return hosts


class _PlayAborted(Exception):
    pass


class Engine:
    def __init__(self, playbook: Playbook, inventory: Inventory, options: RunOptions,
                 reporters: Sequence[Reporter] = ()) -> None:
        self.playbook = playbook
        self.inventory = inventory
        self.options = options
        self.reporters = list(reporters)
        self.summary = RunSummary()
        self.vars = VariableManager(inventory, options.extra_vars, options.check)
        self.connections = ConnectionFactory(self._log_command if options.verbosity >= 3 else None)
        self._emit_lock = threading.Lock()
        self._dead: set[str] = set()  # failed or unreachable: no more tasks this run
        self._preflight: dict[str, list[Problem]] = {}  # hosts failed before being touched
        self._ledgers: dict[str, CheckLedger] = {}  # check mode: what each host would have done
        #: Every event is masked with this before a reporter sees it (secrets.py); it learns
        #: the secrets of play, role and task vars as tasks reach them.
        self.masker = masker_for(inventory, options.extra_vars)
        self._no_log_hosts: set[str] = set()  # hosts running a no_log task: -vvv echo hidden

    # -- events -----------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        event = self.masker.mask_event(event)
        with self._emit_lock:
            for reporter in self.reporters:
                reporter.handle(event)

    def _log_command(self, host: str, command: str) -> None:
        if host in self._no_log_hosts:
            command = "(hidden: no_log)"
        self.emit(CommandSent(host, command))

    # -- run --------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run the playbook. Raises ValidationError (nothing run) when preflight fails the same
        way on every host: then the mistake is in the files or the command line."""
        report = run_preflight(self.playbook, [select_play_hosts(p, self.inventory, self.options)
                                               for p in self.playbook.plays], self.vars, self._selected)
        if report.static_problems():
            raise ValidationError(report.static_problems())
        self._preflight = report.problems
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.forks), thread_name_prefix="host")
        try:
            for play in self.playbook.plays:
                if not self._run_play(play, pool):
                    break
        except KeyboardInterrupt as exc:
            self.summary.interrupted = True
            self.summary.signal = exc.signal_name if isinstance(exc, Terminated) else "SIGINT"
            self.emit(Notice(f"interrupted ({self.summary.signal}): stopping in-flight commands"))
        finally:
            self.connections.close_all()
            pool.shutdown(wait=not self.summary.interrupted, cancel_futures=True)
        self.emit(Recap(self.summary))
        return self.summary

    def _run_play(self, play: Play, pool: ThreadPoolExecutor) -> bool:
        """Run one play; False means stop the whole run (any_errors_fatal, all failed, ...)."""
        hosts = [h for h in select_play_hosts(play, self.inventory, self.options) if h not in self._dead]
        self.emit(PlayStart(play.name, hosts))
        if not hosts:
            self.emit(Notice(f"skipping play '{play.name}': no hosts matched"))
            return True
        for host in hosts:
            self.summary.host(host)
        if not self._fail_preflight(play, hosts):
            return False
        try:
            serial = render(str(play.serial), LazyVars([play.vars, self.options.extra_vars])) \
                if isinstance(play.serial, str) else play.serial
            plan = batches(hosts, serial)
        except (TemplateError, ValueError) as exc:
            self.emit(Notice(f"{play.pos}: bad serial {play.serial!r}: {exc}"))
            for host in hosts:
                self.summary.host(host).failed += 1
            return False
        for batch in plan:
            try:
                self._run_batch(play, batch, hosts, pool)
            except _PlayAborted:
                return False
            if all(h in self._dead for h in batch):
                self.emit(Notice(f"every host of the batch failed: stopping play '{play.name}'"))
                return False
        return True

    def _fail_preflight(self, play: Play, hosts: list[str]) -> bool:
        """Fail, untouched, the hosts whose preflight found problems; False stops the run."""
        bad = [h for h in hosts if h in self._preflight]
        if not bad:
            return True
        self.emit(TaskStart(play.name, "preflight", "preflight", bad, False, str(play.pos)))
        for host in bad:
            problems = self._preflight.pop(host)
            result = TaskResult(Status.FAILED, msg=f"preflight: {len(problems)} problem(s), nothing was run "
                                "on this host:\n" + "\n".join(f"  {p}" for p in problems))
            self._record(play, Task("preflight", "preflight", {}, play.pos, {}), host, result, False)
        if play.any_errors_fatal:
            self.emit(Notice(f"any_errors_fatal: {', '.join(bad)} failed preflight; stopping the run"))
            return False
        if all(h in self._dead for h in hosts):
            self.emit(Notice(f"every host failed preflight: stopping play '{play.name}'"))
            return False
        return True

    def _run_batch(self, play: Play, batch: list[str], play_hosts: list[str], pool: ThreadPoolExecutor) -> None:
        notified: dict[str, set[str]] = {}
        order = {id(t): i for i, t in enumerate(iter_tasks(play.tasks))}
        iters = {h: HostIterator(play.tasks, self._selected, self._rescuer(h)) for h in batch if h not in self._dead}
        while True:
            # A failed host's walk ends at its failure, except that `always` tasks still run.
            waiting = {h: it.current for h, it in iters.items() if it.current is not None}
            if not waiting:
                break
            task = min(waiting.values(), key=lambda t: order[id(t)])
            hosts = [h for h in batch if waiting.get(h) is task]
            results = self._run_task(play, task, hosts, play_hosts, pool, handler=False)
            for host, result in results.items():
                iters[host].advance(result)
                if result.changed and not result.failed:
                    for name in task.notify:
                        notified.setdefault(name, set()).add(host)
            self._check_abort(play, batch, results)
        for handler in play.handlers:
            targets = [h for h in batch if h in notified.get(handler.name, set()) and h not in self._dead]
            if targets:
                self._run_task(play, handler, targets, play_hosts, pool, handler=True)

    def _selected(self, task: Task) -> bool:
        return tags_selected(task.tags, self.options.tags, self.options.skip_tags)

    def _rescuer(self, host: str) -> Callable[[], None]:
        """Called when a block's rescue takes over a failure: Ansible counts it as rescued."""

        def rescued() -> None:
            stats = self.summary.host(host)
            stats.failed -= 1
            stats.rescued += 1
            self._dead.discard(host)

        return rescued

    def _check_abort(self, play: Play, batch: list[str], results: dict[str, TaskResult]) -> None:
        failed = [h for h in results if h in self._dead]  # failed, not ignored, not rescued
        if failed and play.any_errors_fatal:
            self.emit(Notice(f"any_errors_fatal: {', '.join(failed)} failed; stopping the run"))
            raise _PlayAborted
        if play.max_fail_percentage is not None and batch:
            pct = 100.0 * sum(1 for h in batch if h in self._dead) / len(batch)
            if pct > play.max_fail_percentage:
                self.emit(Notice(f"max_fail_percentage {play.max_fail_percentage:g}% exceeded "
                                 f"({pct:.0f}% of the batch failed); stopping the run"))
                raise _PlayAborted

    def _run_task(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str],
                  pool: ThreadPoolExecutor, handler: bool) -> dict[str, TaskResult]:
        self.emit(TaskStart(play.name, self._task_title(play, task, hosts, play_hosts), task.module,
                            hosts, handler, str(task.pos)))
        futures: dict[Future[TaskResult], str] = {
            pool.submit(self._run_on_host, play, task, host, play_hosts): host for host in hosts
        }
        results: dict[str, TaskResult] = {}
        pending: Iterable[Future[TaskResult]] = futures
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                host = futures[fut]
                results[host] = fut.result()
                self._record(play, task, host, results[host], handler)
        return {h: results[h] for h in hosts}

    def _task_title(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str]) -> str:
        """The task name, templated with the first host's vars when that works (as Ansible does)."""
        try:
            variables = self.vars.for_task(play, task, hosts[0], play_hosts)
            self.masker.add_vars(variables)
            return str(render(task.name, variables))
        except TemplateError:
            return task.name

    def _run_on_host(self, play: Play, task: Task, host: str, play_hosts: list[str]) -> TaskResult:
        try:
            variables = self.vars.for_task(play, task, host, play_hosts)
            spec = connection_spec(host, self.vars.for_task(play, None, host, play_hosts))
            connection = self.connections.get(spec)
        except TemplateError as exc:
            return TaskResult(Status.FAILED, msg=f"{task.pos}: {exc}", no_log=self._no_log(play, task, None))
        self.masker.add_vars(variables)
        no_log = self._no_log(play, task, variables)
        executor = TaskExecutor(task, host, variables, connection, self.options.check, self.options.diff,
                                ledger=self._ledgers.setdefault(host, CheckLedger()), play_timeout=play.timeout)
        if no_log:
            self._no_log_hosts.add(host)
        try:
            result = executor.run()
        finally:
            self._no_log_hosts.discard(host)
        result.no_log = no_log
        ignore = task.kw("ignore_errors")
        if result.failed and result.status != Status.UNREACHABLE and ignore is not None:
            try:
                result.ignored = bool(ignore) if isinstance(ignore, bool) else \
                    str(render(ignore, variables)).lower() in ("true", "yes", "1")
            except TemplateError as exc:
                result.msg += f"; ignore_errors could not be evaluated: {exc}"
        return result

    def _no_log(self, play: Play, task: Task, variables: LazyVars | None) -> bool:
        value = task.kw("no_log", play.no_log)
        if variables is None and isinstance(value, str):
            return True  # cannot be rendered: when in doubt, hide
        try:
            return no_log_enabled(value, None if variables is None else lambda v: render(v, variables))
        except TemplateError:
            return True  # when in doubt, hide

    def _record(self, play: Play, task: Task, host: str, result: TaskResult, handler: bool) -> None:
        name = task.kw("register")
        if name:
            self.vars.register(host, name, mark_unsafe(result.registered()))  # host data: never templated
        self.summary.host(host).count(result)
        if result.failed and not result.ignored:
            self._dead.add(host)
        self.emit(TaskEnd(play.name, task.name, task.module, host, result, handler))
