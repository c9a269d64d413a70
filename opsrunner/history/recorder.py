"""The history subscriber: records a run from the engine's events, like a reporter.

It never fails the run: the first database error (unwritable path, full disk, a locked
or corrupt file) is reported once as a warning and recording stops for this run.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsrunner.errors import CommandError
from opsrunner.events import Event, Recap, TaskEnd, TaskProgress, TaskStart, TaskTitles
from opsrunner.extravars import masked_argv
from opsrunner.gitrepo import GitState, git_state
from opsrunner.history import location as locations
from opsrunner.history.inflight import InFlight
from opsrunner.history.liveness import HEARTBEAT_S, ControllerStamp
from opsrunner.history.outcomes import Reservation
from opsrunner.history.store import HistoryStore, RunRow, TaskRow, row_fields
from opsrunner.history.taskrows import FAILED_STATUSES, changed, task_row
from opsrunner.secrets import Masker

Warn = Callable[[str], object]

#: How often the writer thread records the results handed to it: one transaction per
#: interval. A transaction and a thread wake-up per task cost ~0.75 ms of every task's time
#: on one host (bench/RESULTS.md); a row still reaches the database within this interval.
WRITE_INTERVAL_S = 0.2
#: What a killed controller's record must hold - a result that changed or failed a host, the
#: start of a task (what it was doing) - wakes the writer at once instead: written within
#: this long of being reported. At most one such early write per WRITE_SOON_S, so a run of
#: short tasks that all change something (every `command`) still costs a transaction per
#: WRITE_SOON_S, not one a task. What a controller killed meanwhile had not written, its
#: record says it may lack: a write stamps its heartbeat with the time its results were
#: taken (HistoryStore.record_progress), and readers of an aborted run name that time.
WRITE_SOON_S = 0.05
#: A write that only adds results stamps the run's row no more often than this: each stamp
#: is an UPDATE of the row (a dead row version on PostgreSQL). A stamp left older is still
#: true: every result reported before it is recorded.
STAMP_EVERY_S = 1.0
#: How long a write waits for another writer (a locked database) before recording gives up
#: with a warning: the run itself never waits longer than this for its history.
BUSY_TIMEOUT_S = 5.0
#: How long the end of a run whose history failed waits for it once more before it is kept aside.
LATE_TIMEOUT_S = 1.0


class HistoryUnavailable(CommandError):
    """`--history-required` and the history cannot be written: the run stops before any host
    is touched. Exit 1 (CommandError), as `opsrunner history` when it cannot read it: the
    inputs are right (4 would say "fix your files"), the database is not there now."""


def new_run_id() -> str:
    """Sortable and short: 20261201-013045-3f2a9c01."""
    # 32 random bits: with 16, two controllers sharing a history collided (seen at 100 runs in seconds)
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(4).hex()}"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


class HistoryRecorder:
    """Subscribe to the engine's events; write the run, each task result and the recap.

    Its writer thread opens the database and records the run's start (with the playbook's
    git state, two git commands) while the play begins, then writes the results handed to
    it every WRITE_INTERVAL_S; finish() and close() wait for it. Events arrive masked by the
    engine; what the recorder adds of its own is masked with the run's Masker too."""

    def __init__(self, location: str, run: RunRow, masker: Masker, warn: Warn, required: bool = False,
                 reads: Sequence[Path] = ()) -> None:
        """`required`: open the history and record the run's start now, raising
        HistoryUnavailable when that fails (before any host is touched). `reads`: the files
        and folders the run reads, besides its playbook (git_state tells the untracked)."""
        self.location = location
        self.reads = reads
        self.path = locations.display(location)  # a URL's password never shows
        self.run = run
        self.masker = masker
        self.warn = warn
        self.store: HistoryStore | None = None
        self._failed = False  # after the first database error: recording stopped for this run
        self._failure = ""  # when and why it stopped (masked), for the row's record_gap
        self._opened = False  # the run's row was written
        self._reservation: Reservation | None = None  # room for the run's end, beside the database
        self._stamp = ControllerStamp.of_this_process()
        self._seq = 0
        self._written = 0  # task results recorded
        # Every result is handed to the writer thread as it is reported: what a write takes at
        # `at` is all that was reported before `at`, so its stamp is a true bound (flush() only
        # says when to write early).
        self._pending: list[tuple[int, TaskRow]] = []  # handed to the writer thread, not yet written
        self._pending_lock = threading.Lock()
        # Nothing can be reported before the recorder exists: the row's first stamp, however late
        # it is inserted (git_state) or the first write fails.
        self._created = time.time()
        self._stamped = 0.0  # time.monotonic() of the last write that stamped the row
        self._stop_writer = threading.Event()
        self._soon = False  # what was reported since the last flush must be written soon
        self._wake = threading.Event()  # the writer's: write now (or stop)
        self._titles = TaskTitles()  # the templated title each task was started with
        # The task the run is in (its title, masked, and RunRow.in_flight), for the writer thread.
        self._flight = InFlight(self.masker.mask)
        self._current_written: str | None = None
        self._in_flight_written: dict[str, Any] = {}  # the in_flight written last
        self.finished = False
        if required:
            try:
                self._open()
            except Exception as exc:
                self._release()
                raise HistoryUnavailable(f"run history {self.path} unavailable (--history-required): "
                                         f"{self._cause(exc)}; nothing was run") from None
        self._writer: threading.Thread | None = threading.Thread(
            target=self._write_loop, name="opsrunner-history", daemon=True)
        self._writer.start()

    def _open(self) -> None:
        self.run = with_git_state(self.run, git_state(Path(self.run.playbook), self.reads))
        self._reservation = Reservation.make(self.location, self.run.id)  # while there is room
        store = HistoryStore(self.location, busy_timeout_s=BUSY_TIMEOUT_S)
        try:
            store.start_run(self.run, self._stamp, heartbeat=self._created)
        except BaseException:
            store.close()
            raise
        self.store = store
        self._opened = True

    def _cause(self, exc: BaseException) -> str:
        return _cause(exc, self.masker, self.location)

    def _release(self) -> None:
        """The room reserved for the run's end is not needed: its row says it."""
        if self._reservation is not None:
            self._reservation.release()
            self._reservation = None

    def _guard(self, action: Callable[[], None]) -> None:
        if self._failed or (self.store is None and action != self._open):
            return
        try:
            action()
        except Exception as exc:  # sqlite3.Error, psycopg.Error, OSError (full disk), anything: never fatal
            self.warn(f"WARNING: run history not recorded in {self.path}: {self._cause(exc)}; the run goes on")
            self._failed = True
            self._failure = f"from {time.strftime('%H:%M:%S')} on: {self._cause(exc)}"
            if self.store is not None:
                self.store.close()
            self.store = None

    def handle(self, event: Event) -> None:
        if isinstance(event, TaskStart):
            self._titles.started(event)
            self._flight.started(event)
            self._wake_writer()  # what a killed controller was doing: no result of it may come for long
        elif isinstance(event, TaskProgress):
            if self._flight.progress(event):
                self._wake_writer()  # what the task has done so far: its controller may be killed before its end
        elif isinstance(event, TaskEnd):
            self._flight.ended(event)
            self._seq += 1
            row = task_row(event, self._titles.title(event), self.masker.mask)
            if not self._failed:
                with self._pending_lock:
                    self._pending.append((self._seq, row))
            if changed(row) or row.status in FAILED_STATUSES:  # what it did to a host: written at flush()
                self._soon = True
        elif isinstance(event, Recap):
            recap = {h: s.as_dict() for h, s in event.summary.stats.items()}
            self.finish(event.summary.exit_code(), recap)

    def flush(self) -> None:
        """The results reported so far are all in: wake the writer thread now where one of them
        must be written soon (a task's results on many hosts then share one write). The writes
        are the writer's: with many hosts, every sqlite call made on the engine's thread waited
        for the GIL behind the host threads (~2 ms a row at 200 hosts), and the next task waited."""
        if self._soon:
            self._soon = False
            self._wake_writer()

    def _wake_writer(self) -> None:
        if not self._failed and not self._wake.is_set():
            self._wake.set()

    def _write_loop(self) -> None:
        if self.store is None:
            self._guard(self._open)
        self._stamped = time.monotonic()
        while True:
            soon = self._wake.wait(WRITE_INTERVAL_S)
            if self._stop_writer.is_set():
                return
            self._wake.clear()  # before the results are taken: what is handed after it wakes it again
            # the controller lives: readers tell it from one that died
            self._write_pending(beat=time.monotonic() - self._stamped >= HEARTBEAT_S)
            if soon:  # the next early write no sooner than WRITE_SOON_S: bounded, however many tasks
                self._stop_writer.wait(WRITE_SOON_S)

    def _write_pending(self, beat: bool = False) -> None:
        """The results reported so far, the task the run is in, and the time they were taken
        (the row's heartbeat: every result reported before it is recorded), in one transaction.
        A write of results alone stamps the row at most every STAMP_EVERY_S: its older stamp
        stays true."""
        at = time.time()  # before they are taken: a result reported after it may be missing
        with self._pending_lock:
            rows, self._pending = self._pending, []
        current, flight = self._flight.title, self._flight.record
        if current is None or current == self._current_written or self.finished:
            current = None
        # replaced whole on each change: the same object is the one written
        in_flight = None if not flight or flight is self._in_flight_written or self.finished else flight
        if not (rows or current is not None or in_flight is not None or beat):
            return
        self._current_written = current or self._current_written  # shown of a run whose controller died
        self._in_flight_written = in_flight or self._in_flight_written
        stamp = beat or current is not None or time.monotonic() - self._stamped >= STAMP_EVERY_S
        self._guard(lambda: self._record(rows, current, at if stamp else None, in_flight))

    def _record(self, rows: list[tuple[int, TaskRow]], current: str | None, at: float | None,
                in_flight: dict[str, Any] | None = None) -> None:
        if self.store is not None:
            self.store.record_progress(self.run.id, rows, current, at, in_flight)
            self._written += len(rows)
            if at is not None:
                self._stamped = time.monotonic()

    def _drain(self) -> None:
        """Stop the writer thread once it has recorded the run's start, then write what is
        still pending here (the calling thread makes every later write too)."""
        if self._writer is not None:
            self._stop_writer.set()
            self._wake.set()
            self._writer.join()
            self._writer = None
        self._write_pending()

    def finish(self, code: int, recap: dict[str, Any] | None = None, reason: str | None = None) -> None:
        """Record the run's end; a run stopped before its recap (preflight, exit 4, an error,
        Ctrl-C) ends too, with `reason`: why (masked here)."""
        if self.finished:
            return
        self.finished = True
        self.flush()
        self._drain()
        why = None if reason is None else masked_reason(reason, self.masker, self.location)
        self._guard(lambda: self.store.finish_run(self.run.id, code, recap or {}, why) if self.store else None)
        if not self._failed:
            self._release()
            return
        gap = f"{self._written} of {self._seq} task results recorded; the history could not be written {self._failure}"
        self._record_late(dataclasses.replace(self.run, ended=time.time(), exit_code=code, recap=recap or {},
                                              reason=why, record_gap=gap, current_task=None))

    def _record_late(self, run: RunRow) -> None:
        """The end of a run whose history failed during it (a full disk, a lost server): its
        open row closed now if the history takes it (room freed meanwhile), else kept in the
        room reserved beside the database for whoever opens it next (outcomes.py). Never the
        open row a reader would take for a controller that died."""
        if self._opened:  # a history that never took the run's start is not waited for again
            try:
                store = HistoryStore(self.location, busy_timeout_s=LATE_TIMEOUT_S)
                try:
                    store.record_outcome(row_fields(run, self._stamp))
                finally:
                    store.close()
                self.warn(f"WARNING: run history {self.path}: run {run.id} recorded with its end after all; "
                          f"its record is incomplete: {run.record_gap}")
                self._release()
                return
            except Exception:  # still failing: kept aside
                pass
        if self._reservation is not None and self._reservation.keep(row_fields(run, self._stamp)):
            self.warn(f"WARNING: run history {self.path}: the end of run {run.id} is kept in "
                      f"{self._reservation.path} and recorded once the history can be written")
        elif self._opened:
            self.warn(f"WARNING: run history {self.path}: the end of run {run.id} could not be kept either: "
                      "the history will show it as aborted (controller gone)")

    def close(self) -> None:
        self.flush()
        self._drain()
        if self.store is not None:
            self.store.close()
            self.store = None


#: How many untracked files a run's note names.
UNTRACKED_NAMED = 10


def with_git_state(run: RunRow, state: GitState) -> RunRow:
    """The row with its commit, dirty flag, and a note naming the files it reads that are
    not in that commit (untracked): `git_dirty` alone would not say the commit lacks them."""
    notes = run.notes
    if state.untracked:
        named = ", ".join(state.untracked[:UNTRACKED_NAMED])
        more = f" and {len(state.untracked) - UNTRACKED_NAMED} more" if len(state.untracked) > UNTRACKED_NAMED else ""
        notes = [*notes, f"untracked in git, not in commit {str(state.commit)[:10]}: {named}{more}"]
    return dataclasses.replace(run, git_commit=state.commit, git_dirty=state.dirty, notes=notes)


def _warn(message: str) -> None:
    sys.stderr.write(message + "\n")


def _cause(exc: BaseException, masker: Masker, location: str) -> str:
    """What went wrong, masked: the run's secrets and the location's password."""
    return locations.scrub(masker.mask(f"{type(exc).__name__}: {str(exc).strip()}"), location)


def masked_reason(reason: str, masker: Masker, location: str) -> str:
    """Why a run ended, as recorded: masked as every message is, no URL's password, bounded."""
    text = locations.scrub(masker.mask(reason.strip()), location)
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + " ..."


#: The longest reason recorded (a ValidationError lists every problem, one a line).
REASON_CHARS = 4000


@dataclass(frozen=True)
class PlayRun:
    """What a run's row says of it before it begins: the command line, playbook, inputs."""

    playbook: Path
    inventories: Sequence[str]
    extra_vars: dict[str, Any]
    argv: Sequence[str]
    schedule: str | None = None
    run_id: str | None = None
    check_mode: bool = False
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    run_group: str | None = None
    slice_text: str | None = None
    started: float | None = None
    #: Files and folders the run reads besides its playbook (task files, roles, inventories).
    reads: tuple[Path, ...] = ()

    def row(self, where: str, masker: Masker) -> RunRow:
        """The row, masked with the run's Masker (secrets.py), no history URL's password in it."""
        argv = [locations.scrub(a, where) for a in masked_argv(self.argv, masker)]
        return RunRow(
            id=self.run_id or new_run_id(), started=self.started or time.time(), user=_user(),
            controller=os.uname().nodename, command=shlex.join(["opsrunner", *argv]), cwd=os.getcwd(),
            playbook=str(self.playbook.resolve()), inventory=list(self.inventories),
            extra_vars=masker.mask_vars(self.extra_vars), schedule=self.schedule, check_mode=self.check_mode,
            options=masker.mask_value(self.options), run_group=self.run_group, slice=self.slice_text,
        )


def recorder_for_play(play: PlayRun, path: str | None = None, *, masker: Masker, warn: Warn = _warn,
                      required: bool = False) -> HistoryRecorder:
    """The subscriber that records one run (at `path`, a file or a postgresql:// URL, else the
    default)."""
    where = locations.resolve(path)
    return HistoryRecorder(where, play.row(where, masker), masker, warn, required=required, reads=play.reads)


def record_unstarted(play: PlayRun, path: str | None, code: int, reason: str, *, masker: Masker,
                     outcome: str | None = None, warn: Warn = _warn) -> str | None:
    """A run that ended before its play began (bad input, no host to target, a run lock held,
    a dirty checkout): its row, written closed at once with its exit code, why it ended and
    what happened (`outcome`) where the exit code alone would mislead. Never fails the
    run: a history that cannot be written is a warning, as for any run. Its id, or None."""
    where = locations.resolve(path)
    try:
        row = play.row(where, masker)
        row = dataclasses.replace(with_git_state(row, git_state(Path(row.playbook), play.reads)), ended=time.time(),
                                  exit_code=code, outcome=outcome, reason=masked_reason(reason, masker, where))
        store = HistoryStore(where, busy_timeout_s=BUSY_TIMEOUT_S)
        try:
            store.start_run(row, ControllerStamp.of_this_process())
        finally:
            store.close()
    except Exception as exc:  # as the recorder: never fatal
        warn(f"WARNING: run history not recorded in {locations.display(where)}: {_cause(exc, masker, where)}")
        return None
    return row.id
