"""The one way to run a playbook: `opsrunner.run(PlayRequest(...))`.

The CLI (`opsrunner play`), scheduled runs (`opsrunner schedule run`) and the tests all
come through here, so a run is assembled in one place: the files are loaded and checked
(every problem at once, exit 4, before any host is touched), the run lock is taken, the
run is recorded in the history, and its secrets are masked in everything it writes.

    import opsrunner

    result = opsrunner.run(opsrunner.PlayRequest("restart_training.yml", extra_vars=["steps=100"]),
                           on_event=print)
    result.exit_code        # 0 ok, 2 a task failed, 3 unreachable, 99/143 interrupted
    result.summary.stats    # per host: ok, changed, failed, skipped, unreachable, rescued, ignored

Errors are raised, each carrying what failed: ValidationError (its problems, with
file:line:column; exit 4), NoHostsToTarget (exit 1), UsageError (exit 5), RunLockedError (exit
2). However a run ends, its history row is closed with the exit code it ended with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.errors import OpsrunnerError, Problem, SourcePos, ValidationError
from opsrunner.events import Event, Reporter
from opsrunner.exitcodes import exit_code_of
from opsrunner.playrequest import PlayRequest as PlayRequest  # re-exported: opsrunner.PlayRequest
from opsrunner.playrequest import RunInputs as RunInputs
from opsrunner.results import RunSummary
from opsrunner.secrets import mask_error

if TYPE_CHECKING:
    from opsrunner.inventory import Inventory
    from opsrunner.locks.run_lock import RunLock
    from opsrunner.playbook import Playbook
    from opsrunner.preflight import PreflightReport
    from opsrunner.runrecord import Unstarted

EventCallback = Callable[[Event], object]


@dataclass(frozen=True)
class RunResult:
    """A run that reached its recap (interrupted runs too)."""

    exit_code: int
    summary: RunSummary
    #: The run's history row, or None when it was not recorded.
    run_id: str | None


def load(request: PlayRequest) -> RunInputs:
    """Load and validate the playbook, the inventory and the extra vars; every problem of the
    three in one ValidationError."""
    return _load(request, None)


def _load(request: PlayRequest, known: Unstarted | None) -> RunInputs:
    """load(), telling `known` the secrets it found before it raises (to mask what is recorded)."""
    from opsrunner.extravars import parse_extra_vars
    from opsrunner.inventory import load_inventory, localhost_inventory
    from opsrunner.playbook import load_playbook
    from opsrunner.project import default_inventory, playbook_folders, resolve_playbook
    from opsrunner.runrecord import NoHosts, learn_playbook_patterns
    from opsrunner.secrets import masker_for
    from opsrunner.yamlsource import positioned

    cwd = Path.cwd()
    problems: list[Problem] = []
    playbook_path = resolve_playbook(str(request.playbook), cwd)
    playbook = inventory = None
    extra: dict[str, Any] = {}
    try:
        playbook = load_playbook(playbook_path)
    except ValidationError as exc:
        folders = playbook_folders(str(request.playbook), cwd) if not playbook_path.exists() else []
        where = f" (looked in {', '.join(str(f) for f in folders)})" if folders else ""
        problems += [dataclasses.replace(p, message=p.message + where) for p in exc.problems]
    sources: list[Path | str] = [*request.inventory] or [default_inventory(cwd)]
    try:
        inventory = load_inventory(sources, playbook_path.parent) \
            if request.inventory or Path(sources[0]).exists() else localhost_inventory(playbook_path.parent)
    except ValidationError as exc:
        problems += exc.problems
    try:
        extra = positioned(parse_extra_vars(request.extra_vars), request.variables)
    except ValidationError:
        problems += _extra_vars_problems(request.extra_vars, inventory, playbook, playbook_path)
    try:
        options = request.options(extra)
    except ValidationError as exc:  # a bad --slice: told with the files' problems
        problems += exc.problems
    masker = masker_for(inventory if inventory is not None else NoHosts(), extra)
    learn_playbook_patterns(masker, playbook, playbook_path, extra)  # before the run's row is written
    masker.add(request.become.password)  # typed at -K: masked wherever it would show
    if known is not None:
        known.learn(extra, masker)
    if problems or playbook is None or inventory is None:
        raise ValidationError(problems)
    if options.start_at_task is not None:
        from opsrunner.startat import check_start_at

        check_start_at(playbook, options.start_at_task)
    return RunInputs(playbook, inventory, extra, options, masker)


def _extra_vars_problems(values: Sequence[str], inventory: Inventory | None,
                         playbook: Playbook | None, playbook_path: Path) -> list[Problem]:
    """The -e problems, what they quote masked by the secret names the inventory and the
    playbook configure too (`secret_name_patterns`), not by the defaults alone; a playbook that
    did not load, by those its files write (as its history row is masked: runrecord)."""
    from opsrunner.extravars import parse_extra_vars
    from opsrunner.runrecord import playbook_var_layers, written_patterns
    from opsrunner.secrets import configured_patterns
    from opsrunner.templating import LazyVars

    hosts = [LazyVars(inventory.var_layers(host)) for host in inventory.hosts] if inventory is not None else []
    patterns = configured_patterns([*hosts, *playbook_var_layers(playbook)])
    if playbook is None:
        patterns = tuple(dict.fromkeys([*patterns, *(p for chosen in written_patterns(playbook_path) for p in chosen)]))
    try:
        parse_extra_vars(values, patterns)
    except ValidationError as exc:
        return exc.problems
    return []


def check(request: PlayRequest) -> tuple[RunInputs, PreflightReport]:
    """`opsrunner check`: load, then preflight every host without touching it. Raises
    ValidationError with every problem found (the run's secrets masked)."""
    from opsrunner.preflight import check_playbook
    from opsrunner.targets import NoHostsToTarget, require_targets

    inputs = load(request)
    report = check_playbook(inputs.playbook, inputs.inventory, inputs.extra_vars, inputs.masker)
    problems = report.listing() if report.problems else []
    try:  # the hosts the run would target, with its --limit: none is a problem a run would meet
        require_targets(inputs.playbook, inputs.inventory, inputs.options)
    except NoHostsToTarget as exc:
        where = "--limit" if request.limit else "hosts"
        problems.append(Problem(SourcePos(f"<{where}>"), str(exc).removesuffix("; nothing was run"), where))
    if problems:
        raise mask_error(ValidationError(problems), inputs.masker)
    return inputs, report


def run(request: PlayRequest, reporters: Sequence[Reporter] = (), on_event: EventCallback | None = None,
        on_ready: Callable[[], object] | None = None) -> RunResult:
    """Run a playbook. `reporters` and `on_event` see every event, masked; `on_ready` is
    called once the inputs are loaded and checked, just before the first task."""
    from opsrunner.events import Notice
    from opsrunner.history.recorder import new_run_id
    from opsrunner.runrecord import Unstarted, recorder

    run_id = (request.run_id or new_run_id()) if request.history else None
    known = Unstarted(request, run_id)
    try:
        inputs, empty_slice, lock = _prepare(request, run_id, known)
    except BaseException as exc:  # ended before its play began: recorded too, with why
        known.record(exit_code_of(exc), reason_of(exc), _outcome(exc))
        raise
    try:
        history = recorder(request, inputs, known.started) if request.history else None
        subscribers = [*reporters, *([_Callback(on_event)] if on_event else []), *([history] if history else [])]
        try:
            if empty_slice:
                for subscriber in subscribers:
                    subscriber.handle(Notice(empty_slice))
            if on_ready is not None:
                on_ready()
            summary = _run_engine(inputs, subscribers)
        except BaseException as exc:  # every way out closes the run's history row, with its exit code
            # Recorded as shown: an -e position hides a secret-named value however short (mask_error).
            shown = mask_error(exc, inputs.masker) if isinstance(exc, OpsrunnerError) else exc
            if history is not None:
                history.finish(exit_code_of(exc), reason=reason_of(shown))
            if isinstance(exc, OpsrunnerError):
                raise shown from None
            raise
        finally:
            if history is not None:
                history.close()
    finally:
        if lock is not None:
            lock.release()
    return RunResult(summary.exit_code(), summary, history.run.id if history else None)


def _prepare(request: PlayRequest, run_id: str | None,
             known: Unstarted) -> tuple[RunInputs, str | None, RunLock | None]:
    """The run's inputs, loaded and checked, its targets and its run lock: what must hold
    before any host is touched."""
    from opsrunner.targets import require_targets

    inputs = _load(request, known)
    inputs = dataclasses.replace(inputs, options=dataclasses.replace(inputs.options, run_id=run_id))
    known.options = inputs.options
    try:
        empty_slice = require_targets(inputs.playbook, inputs.inventory, inputs.options)  # before any host
        lock = _run_lock(request, run_id) if request.run_lock else None
    except OpsrunnerError as exc:  # a pattern or --limit may quote a variable's value
        raise mask_error(exc, inputs.masker) from None
    return inputs, empty_slice, lock


def record_not_run(request: PlayRequest, exc: BaseException) -> str | None:
    """Record a run that `exc` ended before its files were even loaded (a scheduled run whose
    `git pull` refused a dirty checkout, a command line that could not start it): its
    history row, closed with the exit code and why. Its id, or None (history off, or not
    writable: a warning)."""
    from opsrunner.extravars import parse_extra_vars
    from opsrunner.history.recorder import new_run_id
    from opsrunner.project import resolve_playbook
    from opsrunner.runrecord import NoHosts, Unstarted, learn_playbook_patterns
    from opsrunner.secrets import masker_for

    known = Unstarted(request, (request.run_id or new_run_id()) if request.history else None)
    try:
        extra = {**parse_extra_vars(request.extra_vars), **request.variables}
    except ValidationError:
        extra = dict(request.variables)
    masker = masker_for(NoHosts(), extra)
    learn_playbook_patterns(masker, None, resolve_playbook(str(request.playbook), Path.cwd()), extra)
    known.learn(extra, masker)
    return known.record(exit_code_of(exc), reason_of(exc), _outcome(exc))


def reason_of(exc: BaseException) -> str:
    """Why a run ended without its recap, as its history row says it (masked when recorded)."""
    from opsrunner.errors import Terminated

    if isinstance(exc, Terminated):
        return f"terminated ({exc.signal_name})"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    if isinstance(exc, OpsrunnerError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc}"


def _outcome(exc: BaseException) -> str | None:
    """What a run stopped before its play was, where its exit code alone would mislead: a
    held run lock exits 2 as a failed run does, though nothing ran."""
    from opsrunner.locks.run_lock import RunLockedError
    from opsrunner.targets import NoHostsToTarget

    said = getattr(exc, "history_outcome", None)  # an error that says it (schedule/runner.py)
    if isinstance(said, str):
        return said
    if isinstance(exc, RunLockedError):
        return "refused"
    return "no hosts" if isinstance(exc, NoHostsToTarget) else None


def _run_engine(inputs: RunInputs, reporters: list[Reporter]) -> RunSummary:
    from opsrunner.engine import Engine
    from opsrunner.interrupts import sigterm_as_interrupt

    with sigterm_as_interrupt():
        return Engine(inputs.playbook, inputs.inventory, inputs.options, reporters, inputs.masker,
                      report_in_flight=_only_shown(reporters)).run()


def _only_shown(reporters: list[Reporter]) -> bool:
    """Whether the run's reporters only show and record events (the console, JSON Lines,
    history): then a task's reporting on one host may be done while the next task's command
    is on its way (idle.py). A library caller's own reporter or callback sees each task's
    result before the next task starts, as ever."""
    from opsrunner.history.recorder import HistoryRecorder
    from opsrunner.history.taskrows import FailedTasks
    from opsrunner.reporting import ConsoleReporter, JsonEventsReporter

    return all(type(r) in (ConsoleReporter, JsonEventsReporter, HistoryRecorder, FailedTasks) for r in reporters)


def _run_lock(request: PlayRequest, run_id: str | None) -> RunLock:
    from opsrunner.locks.run_lock import acquire_run_lock
    from opsrunner.project import resolve_playbook

    return acquire_run_lock(resolve_playbook(str(request.playbook), Path.cwd()), [str(i) for i in request.inventory],
                            run_id)


class _Callback:
    """A reporter that hands each event to a function."""

    def __init__(self, callback: EventCallback) -> None:
        self.callback = callback

    def handle(self, event: Event) -> None:
        self.callback(event)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass
