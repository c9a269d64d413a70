"""Running one task on the hosts that reach it: in parallel on the host pool, run_once,
the task's connection and keywords, no_log, ignore_errors. The engine decides which task
runs where and when; this runs it and records each host's result in the PlayRun."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from opsrunner import idle
from opsrunner.arrivals import Arrivals
from opsrunner.connections.base import Connection, ConnectionSpec
from opsrunner.errors import TemplateError
from opsrunner.events import TaskStart
from opsrunner.executor import TaskExecutor
from opsrunner.hostvars import connection_spec
from opsrunner.ledger import CheckLedger
from opsrunner.playbook import Play, Task
from opsrunner.playrun import PlayRun
from opsrunner.results import Status, TaskResult
from opsrunner.taskconnection import password_hint, task_spec
from opsrunner.taskflags import check_flags, flag, no_log_at, no_log_refusal, run_once, task_no_log
from opsrunner.templating import LazyVars, is_template, render


def started_pool(workers: int) -> ThreadPoolExecutor:
    """A pool whose threads all run already. ThreadPoolExecutor starts a thread per submit and
    waits for it to run; during the first task, behind the ssh transport threads of the hosts
    already connecting, that took ~40 ms a thread at 200 hosts (8 s), here ~0.1 ms."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="host")
    gate = threading.Barrier(workers + 1)
    for _ in range(workers):
        pool.submit(gate.wait)  # each holds its thread until all are started
    gate.wait()
    return pool


#: Modules whose run goes straight to a command on the host's agent: on one host, the
#: reporting before it is done while that command's request is in flight (idle.py).
REPORTED_IN_FLIGHT = frozenset({"command", "shell"})
#: From this many host threads on (each beside its ssh transport thread), the interpreter's
#: forced GIL hand-offs among them, every 5 ms by default, cost more than they give: at 500
#: hosts they took most of the controller's CPU in system time (bench/RESULTS.md, runs 22-23).
MANY_HOST_THREADS = 100
#: The switch interval then, for the run: fewer forced hand-offs (threads waiting on the
#: network give the GIL up at once anyway).
MANY_THREADS_SWITCH_INTERVAL_S = 0.05


@contextlib.contextmanager
def switch_interval_for(workers: int) -> Iterator[None]:
    """A longer switch interval for a run of MANY_HOST_THREADS host threads or more (this
    process's setting, put back at the run's end); below that, nothing changes."""
    before = sys.getswitchinterval()
    if workers >= MANY_HOST_THREADS:
        sys.setswitchinterval(max(before, MANY_THREADS_SWITCH_INTERVAL_S))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


class TaskRunner:
    """Runs tasks of one PlayRun on its host pool."""

    def __init__(self, run: PlayRun, pool: ThreadPoolExecutor) -> None:
        self.run = run
        self.pool = pool

    def step(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str]) -> dict[str, TaskResult]:
        """One task on its hosts; with run_once, on the first host only, and every other host of
        the batch gets that result (registered too), as in ansible-core."""
        try:
            once = len(hosts) > 1 and run_once(task, self.run.task_vars(play, task, hosts[0], play_hosts))
        except TemplateError:
            once = False
        if not once:
            return self.task(play, task, hosts, play_hosts, handler=False)
        first = self.task(play, task, hosts[:1], play_hosts, handler=False)[hosts[0]]
        results = {hosts[0]: first}
        for host in hosts[1:]:
            results[host] = dataclasses.replace(first)
            self.run.store(host, task, first)
            if first.failed and not first.ignored:
                self.run.dead.add(host)
                self.run.summary.host(host).count(first)
        return results

    def task(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str],
             handler: bool) -> dict[str, TaskResult]:
        run = self.run
        if self.declined(task, handler):
            return {h: declined_result() for h in hosts}  # not counted
        start = TaskStart(play.name, self._title(play, task, hosts, play_hosts), task.module,
                          hosts, handler, str(task.pos))
        if len(hosts) == 1:
            # Run here, not in a host thread: a hand-off to a pool thread and back cost ~0.6 ms
            # of every task (two wake-ups, measured on one host). Ctrl-C and SIGTERM then raise
            # in the task itself, and the engine stops the host's in-flight work as before.
            # With reporters that only show and record, a command's reporting (the last task's
            # result, this one's banner) is done once its request is on its way (idle.py); any
            # other task reports first.
            later = run.report_in_flight
            if later and task.module in REPORTED_IN_FLIGHT:
                run.emit_later(start)
            else:
                run.emit(start)
            run.started(play, task, start.task, hosts[0], handler)
            result = self.on_host(play, task, hosts[0], play_hosts)
            if later:
                idle.run()  # what the task did not wait for (a skip, a failed template) is done now
                run.record(play, task, hosts[0], result, handler, later=True)
                run.flush_later()
            else:
                run.record(play, task, hosts[0], result, handler)
                run.flush_reporters()
            return {hosts[0]: result}
        run.emit(start)
        arrivals: Arrivals[TaskResult] = Arrivals()
        futures: dict[Future[TaskResult], str] = {}
        for host in hosts:
            future = arrivals.add(self.pool.submit(self.on_host, play, task, host, play_hosts))
            futures[future] = host
            run.started(play, task, start.task, host, handler, future)
        results: dict[str, TaskResult] = {}
        while len(results) < len(futures):
            for fut in arrivals.next_batch():
                host = futures[fut]
                results[host] = fut.result()
                run.record(play, task, host, results[host], handler)
            run.flush_reporters()  # before waiting again: what has arrived is visible
        return {h: results[h] for h in hosts}

    def declined(self, task: Task, handler: bool) -> bool:
        """--step: the user answered no for this task (it is skipped, not counted)."""
        step = self.run.options.step
        if step is None or task.module == "meta":
            return False
        self.run.flush_reporters()  # what ran so far is on the terminal before the question
        return not step.confirm(f"{'HANDLER' if handler else 'TASK'}: {task.name}")

    def start(self, play: Play, task: Task, host: str, play_hosts: list[str]) -> Future[TaskResult]:
        """strategy free: announce the task on one host and start it on the pool; the caller
        records the result (finish) on its own thread, so the run's state keeps one writer."""
        title = self._title(play, task, [host], play_hosts)
        self.run.emit(TaskStart(play.name, title, task.module, [host], False, str(task.pos), strategy="free"))
        future = self.pool.submit(self.on_host, play, task, host, play_hosts)
        self.run.started(play, task, title, host, False, future)
        return future

    def finish(self, play: Play, task: Task, host: str, result: TaskResult) -> None:
        self.run.record(play, task, host, result, False)

    def _title(self, play: Play, task: Task, hosts: list[str], play_hosts: list[str]) -> str:
        """The task name, templated with the first host's vars when that works (as Ansible does)."""
        if not is_template(task.name):
            return task.name  # nothing to render (nor secrets to learn for it): ~0.1 ms a task
        try:
            variables = self.run.task_vars(play, task, hosts[0], play_hosts)
            self.run.masker.add_vars(variables)
            return str(render(task.name, variables))
        except TemplateError:
            return task.name

    def on_host(self, play: Play, task: Task, host: str, play_hosts: list[str]) -> TaskResult:
        run = self.run
        try:
            variables = run.task_vars(play, task, host, play_hosts)
            spec = task_spec(task, self._host_spec(play, host, play_hosts), variables,
                             lambda: self._local_spec(play, play_hosts), run.options.become)
            connection: Connection = run.connections.get(spec)  # its `environment`: per loop item (executor)
            check = flag(task, "check_mode", variables, run.options.check)
            diff = flag(task, "diff", variables, run.options.diff)
            # Read after the run (or by step() for the batch): one that is no boolean fails the task first.
            check_flags(task, variables, ("run_once", "ignore_errors"))
        except TemplateError as exc:
            return TaskResult(Status.FAILED, msg=str(exc) if exc.pos else f"{task.pos}: {exc}",  # once, not twice
                              no_log=task_no_log(play, task, None))
        run.masker.add_vars(variables)
        with contextlib.suppress(TemplateError):  # one that does not render hides the task (task_no_log)
            refusal = no_log_refusal(play, task, lambda value: render(value, variables))
            if refusal:  # known only now (preflight refuses the others): nothing is run, nothing shown
                return TaskResult(Status.FAILED, msg=f"{no_log_at(play, task)}: {refusal}")
        no_log = task_no_log(play, task, variables)
        executor = TaskExecutor(task, host, variables, connection, check, diff,
                                ledger=run.ledgers.setdefault(host, CheckLedger()), play_timeout=play.timeout,
                                checked=run.checked_args)
        if no_log:
            run.no_log_hosts.add(host)
        try:
            result = executor.run()
        finally:
            run.no_log_hosts.discard(host)
        result.no_log = no_log
        hint = password_hint(task, host, f"{result.stderr}\n{result.msg}", run.options.become) \
            if result.failed else None
        if hint:
            result.msg = hint
        _ignore_errors(task, result, variables)
        return result

    def _host_spec(self, play: Play, host: str, play_hosts: list[str]) -> ConnectionSpec:
        """The host's connection in this play, built again only when registered vars have changed
        (set_fact may set ansible_host) or a host has left the play (play_hosts): ~4% of a
        task's controller time."""
        run = self.run
        key = (host, id(play), run.vars.generation, len(run.dead))
        found = run.host_specs.get(key)
        if found is None or found[0] is not play:
            spec = connection_spec(host, run.task_vars(play, None, host, play_hosts), run.options.connection)
            found = run.host_specs[key] = (play, spec)
        return found[1]

    def _local_spec(self, play: Play, play_hosts: list[str]) -> ConnectionSpec:
        """delegate_to: localhost - the inventory's localhost if it has one, else a local connection."""
        if "localhost" in self.run.inventory.hosts:
            return connection_spec("localhost", self.run.task_vars(play, None, "localhost", play_hosts),
                                   self.run.options.connection)
        return connection_spec("localhost", LazyVars([{"connection": "local"}]))


def declined_result() -> TaskResult:
    return TaskResult(Status.SKIPPED, msg="skipped at --step")


def _ignore_errors(task: Task, result: TaskResult, variables: LazyVars) -> None:
    """ignore_errors: a failure (not an unreachable host) that the run goes on after."""
    if result.status == Status.UNREACHABLE and task.kw("ignore_unreachable") is True:
        result.ignored = True  # as ansible-core: counted ignored, the host stays in the play
        return
    ignore = task.kw("ignore_errors")
    if result.failed and result.status != Status.UNREACHABLE and ignore is not None:
        try:
            result.ignored = flag(task, "ignore_errors", variables, False)
        except TemplateError as exc:
            result.msg += f"; ignore_errors could not be evaluated: {exc}"
