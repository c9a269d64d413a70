"""PlayRun: the state of one run of a playbook, shared by the engine and the task runner.

Everything that changes while a run goes on lives here (counters, the hosts out of the
run, registered variables, open connections, check-mode ledgers, what is secret), so the
engine's classes hold no run state of their own and a run can be looked at as one object.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from opsrunner import idle, interrupts
from opsrunner.argcheck import Memo
from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.errors import Problem
from opsrunner.events import CommandSent, Event, Reporter, TaskEnd, TaskProgress
from opsrunner.hostvars import VariableManager
from opsrunner.inventory import Inventory
from opsrunner.ledger import CheckLedger
from opsrunner.playbook import Play, Playbook, Task
from opsrunner.results import RunSummary, Status, TaskResult
from opsrunner.secrets import Masker
from opsrunner.selection import RunOptions
from opsrunner.templating import LazyVars, mark_unsafe


@dataclass(frozen=True)
class InFlight:
    """A task started on a host and not recorded yet: what an interrupted run records as cut short."""

    play: Play
    task: Task
    #: The title its TaskStart showed (templated with the first host's vars).
    title: str
    handler: bool
    started: float
    #: Its run on a host thread of the pool; None: it runs on the engine's thread.
    future: Future[TaskResult] | None = None


@dataclass(eq=False)
class PlayRun:
    """One run: its inputs, its reporters and everything it has learnt so far."""

    playbook: Playbook
    inventory: Inventory
    options: RunOptions
    reporters: list[Reporter]
    #: Every event is masked with this before a reporter sees it; it learns the secrets of
    #: play, role and task vars as tasks reach them (secrets.py).
    masker: Masker
    summary: RunSummary = field(default_factory=RunSummary)
    #: Failed or unreachable hosts: no more tasks this run.
    dead: set[str] = field(default_factory=set)
    #: Hosts that failed preflight, with why: failed untouched when their play starts.
    preflight: dict[str, list[Problem]] = field(default_factory=dict)
    #: Check mode: what each host would have done so far.
    ledgers: dict[str, CheckLedger] = field(default_factory=dict)
    #: Hosts running a no_log task now: their -vvv command echo is hidden.
    no_log_hosts: set[str] = field(default_factory=set)
    #: The hosts of the serial batch being run.
    batch: list[str] = field(default_factory=list)
    #: Hosts sent to rescue by another host's any_errors_fatal failure.
    forced: set[str] = field(default_factory=set)
    #: Each host's last failure, for ansible_failed_task / ansible_failed_result.
    failures: dict[str, tuple[Task, TaskResult]] = field(default_factory=dict)
    #: Argument checks made so far, by preflight and the run, shared by the hosts (preflight.Memo).
    checked_args: Memo = field(default_factory=dict)
    #: Whether the reporters only show and record (api._only_shown): a task's reporting on one
    #: host is then done while the next command's request is in flight (idle.py, taskrun.py).
    report_in_flight: bool = False
    #: Each host's connection spec by (host, id(play), vars' generation, dead hosts) (taskrun.py).
    host_specs: dict[tuple[str, int, int, int], tuple[Play, ConnectionSpec]] = field(default_factory=dict)
    #: The task each host is running now (started, not recorded yet), by host: engine's thread only.
    in_flight: dict[str, InFlight] = field(default_factory=dict)
    vars: VariableManager = field(init=False)
    connections: ConnectionFactory = field(init=False)
    _emit_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.vars = VariableManager(self.inventory, self.options.extra_vars, self.options.check,
                                    self.options.run_id, self.options.verbosity,
                                    (self.options.tags, self.options.skip_tags))
        self.connections = ConnectionFactory(self._log_command if self.options.verbosity >= 3 else None,
                                             self.options.connect_slots)

    # -- events -----------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        if idle.pending():  # what this thread put off is reported first: the order is kept
            idle.run()
        self._report(event)

    def emit_later(self, event: Event) -> None:
        """emit(), put off until this thread next waits on a target or reports (idle.py): a
        task's reporting on one host, done while its next request is on its way."""
        idle.put_off(functools.partial(self._report, event))

    def flush_reporters(self) -> None:
        if idle.pending():
            idle.run()
        self._flush()

    def flush_later(self) -> None:
        """flush_reporters(), put off as emit_later()."""
        idle.put_off(self._flush)

    def _report(self, event: Event) -> None:
        event = self.masker.mask_event(event)
        with self._emit_lock:
            for reporter in self.reporters:
                reporter.handle(event)

    def _flush(self) -> None:
        with self._emit_lock:
            for reporter in self.reporters:
                reporter.flush()

    def task_progress(self, host: str, task: object, text: str) -> None:
        """What a task of this run in flight on `host` has done so far (interrupts.so_far), told
        to the reporters; a no_log task's is not (its words may hold what it hides)."""
        flight = self.in_flight.get(host)
        if flight is None or flight.task is not task or host in self.no_log_hosts:
            return  # another run's task, or one recorded meanwhile
        # reported at once, from the task's own thread: what this thread put off (the last task's
        # result) is no part of it, and an error kept by that reporting is not this task's; nor
        # is a reporter's failing on it (a library caller's callback): the task goes on
        with contextlib.suppress(Exception):
            self._report(TaskProgress(flight.play.name, flight.title, flight.task.module, host, text,
                                      flight.handler, source=str(flight.task.pos)))

    def _log_command(self, host: str, command: str) -> None:
        if host in self.no_log_hosts:
            command = "(hidden: no_log)"
        self.emit(CommandSent(host, command))

    # -- variables and results ----------------------------------------------------------------
    def task_vars(self, play: Play, task: Task | None, host: str, play_hosts: list[str]) -> LazyVars:
        """play_hosts / ansible_play_batch: the batch's active hosts; ansible_play_hosts: the play's."""
        batch = [h for h in self.batch or play_hosts if h not in self.dead]
        active = [h for h in play_hosts if h not in self.dead]
        return self.vars.for_task(play, task, host, batch, all_hosts=active)

    def store(self, host: str, task: Task, result: TaskResult) -> None:
        """`register:`, and the facts of set_fact / include_vars / gather_facts, on the host."""
        name = task.kw("register")
        if name:
            self.vars.register(host, name, mark_unsafe(result.registered()))  # host data: never templated
        if not result.failed:
            for item in result.items or [result]:
                for key, value in (item.data.get("ansible_facts") or {}).items():
                    # gathered facts are host data (never templated); set_fact/include_vars values are ours
                    self.vars.register(host, key, mark_unsafe(value) if task.module == "setup" else value)

    def record(self, play: Play, task: Task, host: str, result: TaskResult, handler: bool,
               later: bool = False) -> None:
        """A task's result on a host: stored, counted, and told to the reporters (`later`: as
        emit_later, once the run's state has it)."""
        self.store(host, task, result)
        if task.module != "meta" or task.include_marker:  # as ansible-core: meta tasks are not in the recap
            self.summary.host(host).count(result)
        if result.failed and not result.ignored:
            self.dead.add(host)
            self.failures[host] = (task, result)
        end = TaskEnd(play.name, task.name, task.module, host, result, handler, source=str(task.pos))
        if later:
            self.emit_later(end)
        else:
            self.emit(end)
        if self.in_flight.pop(host, None) is not None:
            interrupts.take_so_far(host, task)  # what it did so far: its result says it now

    # -- interrupted ----------------------------------------------------------------------------
    def started(self, play: Play, task: Task, title: str, host: str, handler: bool,
                future: Future[TaskResult] | None = None) -> None:
        """`task` runs on `host` from now until record(): cut short by an interrupt, it is
        recorded as such (interrupted())."""
        self.in_flight[host] = InFlight(play, task, title, handler, time.monotonic(), future)

    def interrupted(self) -> None:
        """The run was interrupted (summary.signal says by what): the reporting put off is done,
        in order, then every task still in flight is recorded on its host, `interrupted`, with
        what its module said it had done so far (interrupts.so_far); one that finished meanwhile
        on a host thread, as what it did."""
        self._report_put_off()
        for host, flight in list(self.in_flight.items()):
            result = None
            if flight.future is not None and flight.future.done() and not flight.future.cancelled():
                with contextlib.suppress(BaseException):
                    result = flight.future.result()
            if result is None:
                so_far = interrupts.take_so_far(host, flight.task)
                by = self.summary.signal or "SIGINT"
                result = TaskResult(Status.INTERRUPTED, data={"interrupted_by": by},
                                    duration_s=time.monotonic() - flight.started,
                                    msg=so_far or f"interrupted ({by}) while it ran on {host}: what it did there "
                                                  "is not known")
                self.summary.in_flight.append((host, flight.title))
            self.record(flight.play, flight.task, host, result, flight.handler)
        self.in_flight.clear()
        self._report_put_off()
        with contextlib.suppress(Exception):
            self._flush()

    def _report_put_off(self) -> None:
        """What this thread put off (idle.py) reported now, each piece whatever the others do:
        an interrupted run still reports all it did, in order."""
        for _ in range(10000):
            if not idle.pending():
                return
            with contextlib.suppress(Exception):
                idle.run()
