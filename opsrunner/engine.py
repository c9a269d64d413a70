"""The engine: plays x batches x tasks x hosts (Ansible's linear strategy), handlers, events.

The engine is a library: it takes a loaded Playbook and Inventory, emits events to
reporters, and returns a RunSummary. It prints nothing itself.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from opsrunner.connections.base import Connection, ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.errors import Problem, TemplateError, Terminated, ValidationError
from opsrunner.events import CommandSent, Event, Notice, PlayStart, Recap, Reporter, TaskEnd, TaskStart
from opsrunner.executor import TaskExecutor
from opsrunner.handlers import Notifications
from opsrunner.hostvars import VariableManager, connection_spec
from opsrunner.inventory import Inventory
from opsrunner.iteration import HostIterator
from opsrunner.ledger import CheckLedger
from opsrunner.playbook import Play, Playbook, Task, iter_tasks
from opsrunner.preflight import run_preflight
from opsrunner.results import RunSummary, Status, TaskResult
from opsrunner.secrets import masker_for, no_log_enabled
from opsrunner.taskconnection import EnvConnection, environment, password_hint, task_spec
from opsrunner.taskflags import flag, run_once
from opsrunner.templating import LazyVars, is_template, mark_unsafe, render, template_value


def _started_pool(workers: int) -> ThreadPoolExecutor:
    """A pool whose threads all run already. ThreadPoolExecutor starts a thread per submit and
    waits for it to run; during the first task, behind the ssh transport threads of the hosts
    already connecting, that took ~40 ms a thread at 200 hosts (8 s), here ~0.1 ms."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="host")
    gate = threading.Barrier(workers + 1)
    for _ in range(workers):
        pool.submit(gate.wait)  # each holds its thread until all are started
    gate.wait()
    return pool


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
    force_handlers: bool = False


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


def _batch_size(serial: int | str, total: int) -> int:
    if isinstance(serial, str) and serial.endswith("%"):
        return max(1, math.floor(total * int(serial[:-1]) / 100))
    size = int(serial)
    return size if size > 0 else total


def batches(hosts: list[str], serial: int | str | list[int | str] | None) -> list[list[str]]:
    """Ansible's serial: a size, a percentage of the play's hosts, or a list of them whose
    last one repeats (`[1, "50%"]`: one canary, then half of the hosts at a time)."""
    if not serial:
        return [hosts]
    sizes = serial if isinstance(serial, list) else [serial]
    out: list[list[str]] = []
    start = 0
    while start < len(hosts):
        size = _batch_size(sizes[min(len(out), len(sizes) - 1)], len(hosts))
        out.append(hosts[start:start + size])
        start += size
    return out


def select_play_hosts(play: Play, inventory: Inventory, options: RunOptions) -> list[str]:
    """The play's `hosts:` pattern (templated with -e vars), narrowed by --limit."""
    hosts = inventory.select(str(render(play.hosts, options.extra_vars)))
    if options.limit:
        allowed = set(inventory.select(options.limit))
        hosts = [h for h in hosts if h in allowed]
    return hosts


class _PlayAborted(Exception):
    """Stop the run: any_errors_fatal, max_fail_percentage."""


class _PlayEnded(Exception):
    """meta: end_play - the play ends for every host; the run goes on with the next play."""


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
        self._batch: list[str] = []  # the hosts of the batch being run (serial)
        self._forced: set[str] = set()  # sent to rescue by another host's any_errors_fatal failure
        self._failures: dict[str, tuple[Task, TaskResult]] = {}  # for ansible_failed_task/result

    # -- events -----------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        event = self.masker.mask_event(event)
        with self._emit_lock:
            for reporter in self.reporters:
                reporter.handle(event)

    def _flush_reporters(self) -> None:
        with self._emit_lock:
            for reporter in self.reporters:
                reporter.flush()

    def _log_command(self, host: str, command: str) -> None:
        if host in self._no_log_hosts:
            command = "(hidden: no_log)"
        self.emit(CommandSent(host, command))

    # -- run --------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        """Run the playbook. Raises ValidationError (nothing run) when preflight fails the same
        way on every host: then the mistake is in the files or the command line."""
        play_hosts = [select_play_hosts(p, self.inventory, self.options) for p in self.playbook.plays]
        report = run_preflight(self.playbook, play_hosts, self.vars, self._selected)
        if report.static_problems():
            raise ValidationError(report.static_problems())
        self._preflight = report.problems
        pool = _started_pool(min(max(1, self.options.forks), max((len(h) for h in play_hosts), default=1)))
        try:
            for play in self.playbook.plays:
                if not self._run_play(play, pool):
                    break
        except KeyboardInterrupt as exc:
            self.summary.interrupted = True
            self.summary.signal = exc.signal_name if isinstance(exc, Terminated) else "SIGINT"
            self.emit(Notice(f"interrupted ({self.summary.signal}): stopping in-flight commands"))
        finally:
            # Interrupted (or failed), host threads may still be in commands that only the close ends.
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
            variables = LazyVars([play.vars, self.options.extra_vars])
            plan = batches(hosts, template_value(play.serial, variables))
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
            except _PlayEnded:
                return True
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
        self._batch = batch
        notes = Notifications(play.handlers)
        order = {id(t): i for i, t in enumerate(iter_tasks(play.tasks))}
        iters = {h: HostIterator(play.tasks, lambda t: self._selected(t, play), self._rescuer(h))
                 for h in batch if h not in self._dead}
        if play.gather_facts:
            self._gather_facts(play, [h for h in batch if h in iters], play_hosts, pool, iters)
        fatal = False
        while True:
            # A failed host's walk ends at its failure, except that `always` tasks still run.
            waiting = {h: it.current for h, it in iters.items() if it.current is not None}
            if not waiting:
                break
            task = min(waiting.values(), key=lambda t: order[id(t)])
            hosts = [h for h in batch if waiting.get(h) is task]
            results = self._run_step(play, task, hosts, play_hosts, pool)
            for host, result in results.items():
                iters[host].advance(result)
                if result.changed and not result.failed:
                    notes.notify(task.notify, host)
            if task.module == "meta":
                self._meta(play, batch, play_hosts, pool, results, iters, notes)
            fatal = self._check_abort(play, batch, results, iters) or fatal
        if fatal and any(h in self._dead for h in batch):
            self.emit(Notice("any_errors_fatal: a host failed; stopping the run"))
            raise _PlayAborted
        self._flush(play, batch, play_hosts, pool, notes)

    def _gather_facts(self, play: Play, hosts: list[str], play_hosts: list[str], pool: ThreadPoolExecutor,
                      iters: dict[str, HostIterator]) -> None:
        """gather_facts: true - the setup module first, as ansible-core's "Gathering Facts"."""
        task = Task(name="Gathering Facts", module="setup", args={}, pos=play.pos, keywords={},
                    base_dir=play.base_dir)
        for host, result in self._run_task(play, task, hosts, play_hosts, pool, handler=False).items():
            if result.failed:
                iters[host].stop()

    def _flush(self, play: Play, batch: list[str], play_hosts: list[str], pool: ThreadPoolExecutor,
               notes: Notifications) -> None:
        force = self.options.force_handlers or play.force_handlers

        def eligible(host: str) -> bool:
            return host not in self._dead or (force and not self.summary.host(host).unreachable)

        notes.flush(lambda handler, hosts: self._run_task(play, handler, hosts, play_hosts, pool,
                                                          handler=True), batch, eligible)

    def _meta(self, play: Play, batch: list[str], play_hosts: list[str], pool: ThreadPoolExecutor,
              results: dict[str, TaskResult], iters: dict[str, HostIterator], notes: Notifications) -> None:
        acting = [h for h, r in results.items() if r.data.get("meta") and not r.failed]
        action = next((results[h].data["meta"] for h in acting), None)
        if action == "flush_handlers":
            self._flush(play, batch, play_hosts, pool, notes)
        elif action == "end_host":
            for host in acting:
                iters[host].stop()
                notes.forget(host)
        elif action == "end_play":
            self.emit(Notice(f"meta: end_play: ending play '{play.name}'"))
            raise _PlayEnded

    def _selected(self, task: Task, play: Play | None = None) -> bool:
        tags = task.tags
        if any("{{" in t for t in tags):
            # Templated tags, rendered with the play's and extra vars, as ansible-core does.
            variables = LazyVars([play.vars if play else {}, self.options.extra_vars])
            rendered: set[str] = set()
            for tag in tags:
                try:
                    value = render(tag, variables)
                except TemplateError:
                    return True  # preflight (no play at hand): keep the task; the run decides
                rendered.update(str(v) for v in (value if isinstance(value, list) else [value]))
            tags = frozenset(rendered)
        return tags_selected(tags, self.options.tags, self.options.skip_tags)

    def _rescuer(self, host: str) -> Callable[[], None]:
        """Called when a block's rescue takes over a failure: Ansible counts it as rescued."""

        def rescued() -> None:
            if host in self._forced:  # another host's fatal failure: nothing of its own to rescue
                self._forced.discard(host)
                return
            stats = self.summary.host(host)
            stats.failed -= 1
            stats.rescued += 1
            self._dead.discard(host)
            if host in self._failures:
                task, result = self._failures[host]
                self.vars.register(host, "ansible_failed_task", {"name": task.name, "action": task.module})
                self.vars.register(host, "ansible_failed_result", result.registered())

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
                    self._forced.add(host)
                    walk.fail()
                    self._forced.discard(host)
            return True
        if play.max_fail_percentage is not None and batch:
            pct = 100.0 * sum(1 for h in batch if h in self._dead) / len(batch)
            if pct > play.max_fail_percentage:
                self.emit(Notice(f"max_fail_percentage {play.max_fail_percentage:g}% exceeded "
                                 f"({pct:.0f}% of the batch failed); stopping the run"))
                raise _PlayAborted
        return False

    def _run_task(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str],
                  pool: ThreadPoolExecutor, handler: bool) -> dict[str, TaskResult]:
        self.emit(TaskStart(play.name, self._task_title(play, task, hosts, play_hosts), task.module,
                            hosts, handler, str(task.pos)))
        if len(hosts) == 1:
            # Run here, not in a host thread: a hand-off to a pool thread and back cost ~0.6 ms
            # of every task (two wake-ups, measured on one host). Ctrl-C and SIGTERM then raise
            # in the task itself, and run() stops the host's in-flight work as before.
            result = self._run_on_host(play, task, hosts[0], play_hosts)
            self._record(play, task, hosts[0], result, handler)
            self._flush_reporters()
            return {hosts[0]: result}
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
            self._flush_reporters()  # before waiting again: what has arrived is visible
        return {h: results[h] for h in hosts}

    def _vars(self, play: Play, task: Task | None, host: str, play_hosts: list[str]) -> LazyVars:
        """play_hosts / ansible_play_batch: the batch's active hosts; ansible_play_hosts: the play's."""
        batch = [h for h in self._batch or play_hosts if h not in self._dead]
        active = [h for h in play_hosts if h not in self._dead]
        return self.vars.for_task(play, task, host, batch, all_hosts=active)

    def _task_title(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str]) -> str:
        """The task name, templated with the first host's vars when that works (as Ansible does)."""
        if not is_template(task.name):
            return task.name  # nothing to render (nor secrets to learn for it): ~0.1 ms a task
        try:
            variables = self._vars(play, task, hosts[0], play_hosts)
            self.masker.add_vars(variables)
            return str(render(task.name, variables))
        except TemplateError:
            return task.name

    def _run_on_host(self, play: Play, task: Task, host: str, play_hosts: list[str]) -> TaskResult:
        try:
            variables = self._vars(play, task, host, play_hosts)
            spec = connection_spec(host, self._vars(play, None, host, play_hosts))
            spec = task_spec(task, spec, variables, lambda: self._local_spec(play, play_hosts))
            connection: Connection = self.connections.get(spec)
            env = environment(task, variables)
            if env:
                connection = EnvConnection(connection, env)
            check = flag(task, "check_mode", variables, self.options.check)
            diff = flag(task, "diff", variables, self.options.diff)
        except TemplateError as exc:
            return TaskResult(Status.FAILED, msg=f"{task.pos}: {exc}", no_log=self._no_log(play, task, None))
        self.masker.add_vars(variables)
        no_log = self._no_log(play, task, variables)
        executor = TaskExecutor(task, host, variables, connection, check, diff,
                                ledger=self._ledgers.setdefault(host, CheckLedger()), play_timeout=play.timeout)
        if no_log:
            self._no_log_hosts.add(host)
        try:
            result = executor.run()
        finally:
            self._no_log_hosts.discard(host)
        result.no_log = no_log
        hint = password_hint(task, host, f"{result.stderr}\n{result.msg}") if result.failed else None
        if hint:
            result.msg = hint
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

    def _local_spec(self, play: Play, play_hosts: list[str]) -> ConnectionSpec:
        """delegate_to: localhost - the inventory's localhost if it has one, else a local connection."""
        if "localhost" in self.inventory.hosts:
            return connection_spec("localhost", self._vars(play, None, "localhost", play_hosts))
        return connection_spec("localhost", LazyVars([{"connection": "local"}]))

    def _run_step(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str],
                  pool: ThreadPoolExecutor) -> dict[str, TaskResult]:
        """One task on its hosts; with run_once, on the first host only, and every other host of
        the batch gets that result (registered too), as in ansible-core."""
        try:
            once = len(hosts) > 1 and run_once(task, self._vars(play, task, hosts[0], play_hosts))
        except TemplateError:
            once = False
        if not once:
            return self._run_task(play, task, hosts, play_hosts, pool, handler=False)
        first = self._run_task(play, task, hosts[:1], play_hosts, pool, handler=False)[hosts[0]]
        results = {hosts[0]: first}
        for host in hosts[1:]:
            results[host] = dataclasses.replace(first)
            self._store(host, task, first)
            if first.failed and not first.ignored:
                self._dead.add(host)
                self.summary.host(host).count(first)
        return results

    def _store(self, host: str, task: Task, result: TaskResult) -> None:
        """`register:`, and the facts of set_fact / include_vars / gather_facts, on the host."""
        name = task.kw("register")
        if name:
            self.vars.register(host, name, mark_unsafe(result.registered()))  # host data: never templated
        if not result.failed:
            for item in result.items or [result]:
                for key, value in (item.data.get("ansible_facts") or {}).items():
                    # gathered facts are host data (never templated); set_fact/include_vars values are ours
                    self.vars.register(host, key, mark_unsafe(value) if task.module == "setup" else value)

    def _record(self, play: Play, task: Task, host: str, result: TaskResult, handler: bool) -> None:
        self._store(host, task, result)
        if task.module != "meta":  # as ansible-core: meta tasks are not in the recap
            self.summary.host(host).count(result)
        if result.failed and not result.ignored:
            self._dead.add(host)
            self._failures[host] = (task, result)
        self.emit(TaskEnd(play.name, task.name, task.module, host, result, handler))
