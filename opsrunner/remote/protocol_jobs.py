"""The messages of the ops on a job's processes (protocol.py has the table and the framing):
kill and select (which processes), launch, verify and gpu_wait; and the shapes they share:
a process, the process selection, and the records a launch leaves beside the pidfile."""

from __future__ import annotations

# For mypy only, as protocol.py's types: nothing below runs on the agent.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Tuple, TypedDict, Union

    from .protocol import ErrorReply

    #: MB of GPU memory used, by GPU index (a JSON object's keys are strings on the controller).
    GpuMemory = Dict[int, float]
    #: What a verify check saw: a process count, a phrase, or the GPU memory per GPU.
    CheckValue = Union[int, str, GpuMemory]
    #: A verify check: (name, passed, expected, actual); a JSON array [name, ok, expected, actual].
    Check = Tuple[str, bool, str, CheckValue]

    # -- shared shapes ------------------------------------------------------------------------
    class ProcInfo(TypedDict):
        """A process as kill, select and verify report it."""
        pid: int
        ppid: int
        pgid: int
        sid: int
        uid: int
        cmdline: str

    class Selector(TypedDict, total=False):
        """The process selection shared by kill, select and verify (procs.select)."""
        pidfile: str
        pattern: str
        user: str | int

    class ExitRecord(TypedDict, total=False):
        """The supervisor's exit record beside a pidfile (train.exit), as launch reports it;
        {"pid": N, "unknown": true} when none came."""
        pid: int
        start: int | None
        ended_at: float
        returncode: int | None
        signal: int | None
        oom_kills: int
        unknown: bool

    class LaunchRecord(TypedDict, total=False):
        """The launch record beside a pidfile (train.launch.json)."""
        pid: int | None
        start: int | None
        argv: list[str]
        log: str | None
        log_offset: int
        started_at: float
        boot_id: str | None
        #: [pid, start] of the job's supervisor (a JSON array): the job's child subreaper, alive
        #: while the job or anything its tree daemonized lives.
        supervisor: list[int | None] | None
        #: [[pid, start], ...] of the supervisors of earlier launches from this pidfile that were
        #: still alive at this launch (their jobs had ended, helpers they daemonized had not):
        #: kill_old stops what they hold too.
        earlier_supervisors: list[list[int | None]]
        #: Why the launch failed (the job never started).
        error: str
        #: Written before the job starts, dropped once the record names it: a record that still
        #: has it is of a launch cut short before it knew whether its job started.
        launching: bool
        #: opsrunner signalled this job (kill_old, a rollback's stop): when it last did, and the
        #: signals sent, in order ("SIGTERM", then "SIGKILL" after the grace).
        stopped: StopMark
        #: The launch's extra environment and directory (0600 file: env may hold secrets).
        env: dict[str, str]
        chdir: str | None
        umask: str | None
        #: The release the launch resolved release_link to (releases: true), and its commit.
        release: str | None
        release_dir: str | None
        commit: str | None

    # -- kill, select -------------------------------------------------------------------------
    class StopMark(TypedDict):
        """What opsrunner sent a job it stopped (a launch record's `stopped`)."""
        at: float
        signals: list[str]

    class KillArgs(Selector, total=False):
        signal: str
        grace: float
        check_mode: bool
        #: Select and signal, then reply at once with what was signalled (`signalled`).
        signal_only: bool
        #: [[pid, start], ...] signalled by an earlier signal_only request: wait up to `wait`
        #: seconds for them to exit (reply: `left`), or with `force` SIGKILL those left.
        follow: list[list[int]]
        wait: float
        force: bool
        #: With follow: the pidfile's pids among them (their launch record is marked stopped).
        main: list[int]

    class _KillReplyBase(ErrorReply):
        changed: bool
        killed: list[ProcInfo]
        #: The pidfile's pid and the pattern's matches (check mode: what a later verify skips).
        main: list[int]

    class KillReply(_KillReplyBase, total=False):
        #: Pids that needed SIGKILL after the grace.
        forced: list[int]
        #: signal_only: the signal's name, and [[pid, start], ...] of the processes sent it.
        signal: str
        signalled: list[list[int]]
        #: follow: [[pid, start], ...] of those still alive after the wait.
        left: list[list[int]]
        #: Processes still alive after SIGKILL (with "error").
        survivors: list[ProcInfo]

    class SelectArgs(Selector, total=False):
        tree: bool

    class SelectReply(ErrorReply):
        procs: list[ProcInfo]
        main: list[int]

    # -- launch -------------------------------------------------------------------------------
    class _LaunchArgsBase(TypedDict):
        argv: list[str]

    class LaunchArgs(_LaunchArgsBase, total=False):
        env: dict[str, str]
        chdir: str
        log: str
        pidfile: str
        umask: str
        check_mode: bool
        #: Check mode: pids an earlier kill_old would stop.
        would_stop: list[int]
        #: Check mode: paths an earlier deploy_code would create.
        would_exist: list[str]
        #: A release's `current` link: resolved at launch, argv and chdir then name the real release.
        release_link: str
        #: Seconds to watch the job for an exit at once before replying (default SETTLE_S).
        settle: float
        #: Only the checks made before a job starts: nothing is made, started or stopped.
        check_only: bool

    class LaunchSpec(LaunchArgs, total=False):
        """What the supervisor (supervisor.py) is given: the launch's args and these."""
        exit_file: str | None
        handshake_fd: int
        #: [pid, start] of the supervisor, once started.
        supervisor: list[int | None]

    class LaunchReply(ErrorReply, total=False):
        changed: bool
        pid: int
        #: A live job from this pidfile: nothing was started.
        already_running: bool
        log: str | None
        #: Check mode: the argv that would run, and the program it resolves to.
        would_launch: list[str]
        program: str | None
        exit_file: str | None
        #: The job ended before the launch returned.
        exited: ExitRecord
        log_tail: str
        pgid: int
        sid: int
        cmdline: str
        #: The job's start time (/proc/PID/stat, clock ticks since boot): with the pid, which process it is.
        start: int
        #: check_only: the job that runs from the pidfile now (left alone).
        running: int

    # -- verify, gpu_wait ---------------------------------------------------------------------
    class VerifyArgs(Selector, total=False):
        processes: int
        min_processes: int
        log: str
        log_exists: bool
        log_min_bytes: int
        log_grows: float
        log_regex: str
        log_not_regex: str
        port: int
        gpu_min_memory_mb: float
        gpus: list[int]
        #: Report GPU memory in the status without a GPU check (nvidia-smi runs only where asked).
        gpu_memory: bool
        stable_for: float
        fail_grace: float
        within: float
        #: Seconds verify may take (the task timeout less the controller's margin).
        budget: float
        #: On success, record the pidfile's launch as the job's last good run (good.json).
        record_good: bool

    class _JobStatusBase(TypedDict):
        state: str
        pid: int | None
        uptime_s: float | None
        log_size: int | None
        log_age_s: float | None
        last_line: str | None
        gpu_memory_mb: GpuMemory | None

    class JobStatus(_JobStatusBase, total=False):
        """The job's state per host; "diagnosis" is moved to the reply by a failing verify."""
        diagnosis: str
        #: The release the running job was launched from (releases: true), and its commit.
        release: str | None
        commit: str | None

    class _VerifyReplyBase(ErrorReply):
        ok: bool
        checks: list[Check]
        procs: list[ProcInfo]
        log_size: int | None
        status: JobStatus

    class VerifyReply(_VerifyReplyBase, total=False):
        """ok: false adds the failed checks, the diagnosis, the log's tail and timings."""
        failed: list[Check]
        diagnosis: str
        cut_short: bool
        log_tail: str
        waited_s: float
        #: record_good: the last good run now recorded (its release and commit).
        good: GoodRunRef

    class _GpuWaitArgsBase(TypedDict):
        wait: float

    class GpuWaitArgs(_GpuWaitArgsBase, total=False):
        below_mb: float
        gpus: list[int] | None

    class GpuWaitReply(ErrorReply, total=False):
        """No nvidia-smi: skipped and msg; else the GPUs still at or above below_mb, and all."""
        skipped: bool
        msg: str
        busy: dict[str, float]
        used: dict[str, float]

    # -- the last good run, rollback (the restart role's rescue, rollback.yml) -----------------
    class GoodRunRef(TypedDict):
        release: str | None
        commit: str | None

    class GoodRun(TypedDict, total=False):
        """The job's last good run (<pidfile base>.good.json, 0600): the release and the exact
        launch that verify passed, which rollback relaunches."""
        release: str | None
        release_dir: str | None
        commit: str | None
        link: str | None
        argv: list[str]
        env: dict[str, str]
        chdir: str | None
        log: str | None
        umask: str | None
        pid: int | None
        start: int | None
        launched_at: float | None
        verified_at: float
        boot_id: str | None
        #: The checks it passed (verify's arguments less its timing and pidfile), which a
        #: rollback verifies it with; absent in a record from before they were kept.
        checks: VerifyArgs

    class _RollbackArgsBase(TypedDict):
        pidfile: str

    class RollbackArgs(_RollbackArgsBase, total=False):
        """One step of a rollback (remote/rollback.py); the controller verifies between steps."""
        #: "start" (the default: stop, switch, relaunch) or "undo" (after the relaunch failed).
        step: str
        #: A release name, "previous" (the newest before current that passed verify), or absent:
        #: the last good run's.
        release: str
        #: Auto (after a failed restart): nothing is done while the last good run still runs.
        auto: bool
        #: After a failed launch check (made before the stop): whatever job runs is left running.
        keep_running: bool
        pattern: str
        grace: float
        check_mode: bool
        #: start, auto: why the restart failed after its launch (that launch's release is recorded as failed).
        failed: str
        #: undo: why the rollback's relaunch failed (its release, `release`, is recorded as failed).
        why: str
        #: start, auto: the verify arguments the failed launch was judged by; undo: those the
        #: relaunch was (or would have been) judged by. Its release's verdict compares them (and
        #: the launch) with those it passed with (goodrun.py).
        checks: VerifyArgs
        #: undo: the release `current` pointed to before the rollback.
        back_to: str | None

    class RollbackReply(ErrorReply, total=False):
        #: What happened. start: "nothing" (the good run still runs), "kept" (a job left running
        #: after a failed launch check), "no_good_run", "would",
        #: "launched" (verify it next; `why` when it failed at once), "failed"; undo: "restoring"
        #: (the run before the rollback was started again: verify it next) or "failed". The
        #: controller's verdict adds "rolled_back" and "timed_out".
        outcome: str
        release: str | None
        commit: str | None
        pid: int | None
        #: The started job's start time (clock ticks since boot), as LaunchReply's.
        start: int | None
        #: The started job's exit record (written by its supervisor when it ends).
        exit_file: str
        #: The pids stopped first, and the release `current` was switched from.
        stopped: list[int]
        switched_from: str | None
        argv: list[str]
        chdir: str | None
        verified: bool
        #: Why the relaunch or its verify failed (the diagnosis).
        why: str
        status: JobStatus
        took_s: float
        #: start: the release gone to was recorded as failed before (verdict_text).
        known_failed: str
        #: undo: the pid of the failed relaunch where it still runs (it is left so), else None.
        running: int | None
        #: start: the `current` link removed (or, "would", to remove) because the run rolled
        #: back to is a plain deploy's, not a release's; switched_from names what it pointed to.
        unlinked: str
        #: start: the `current` link that stays although the run rolled back to is a plain
        #: deploy's, and why ("(L -> release R) kept: pid N (its environment: PYTHONPATH) uses it").
        current_kept: str
        #: start: what the scan of /proc for processes using that release could not see.
        scan_limits: str
        #: undo: `current` was switched back to this release.
        switched_back: str
        #: undo: why the run before the rollback could not be started again.
        restore_error: str
        #: start "launched", undo "restoring": the log the started run writes, and the checks it
        #: passed when it was recorded good (absent in an older record): what the controller
        #: verifies it with, not the checks given, which may be a failed redeploy's.
        log: str | None
        checks: VerifyArgs
        #: undo: the hand rollback's saved launch of the run before it is there but cannot be
        #: used ("its saved launch F is unreadable: WHY"): that run was not started again.
        prior_error: str
