"""The agent's wire protocol, used by both ends: the controller (connections/agent.py) and
the agent on the target (server.py, wire.py). Standard library only, and cheap to import.

The agent writes MAGIC, then frames: 1 kind byte + 4-byte big-endian length + body.
  J  a JSON object: the hello (agent -> controller), a request, or a reply
  A  (empty) the agent has read a request: from here on it may run
  K  a reply after which the worker that made it serves the next request (server.py)
  D  a chunk of a request's payload (controller -> agent), E  the end of that payload
The hello carries PROTOCOL and the agent's version: the digest of its package's sources
(package_digest_input), which the controller computes the same way over the artifact it
ships. An agent of another version is never spoken to: the controller ships its own.

The ops (agent.py's OPS), each a request type and a reply type, defined below for mypy only:

  op          request         reply            what asks for it
  kill        KillArgs        KillReply        kill_old
  select      SelectArgs      SelectReply      (the process selection alone)
  launch      LaunchArgs      LaunchReply      launch_detached
  verify      VerifyArgs      VerifyReply      verify
  gpu_wait    GpuWaitArgs     GpuWaitReply     kill_old (wait_gpu_free)
  clear       ClearArgs       ClearReply       clear_cache
  stat        StatArgs        StatReply        deploy_code
  write       WriteArgs       WriteReply       deploy_code (a tar stream as the payload)
  delete      DeleteArgs      DeleteReply      deploy_code (delete: true)
  read        ReadArgs        ReadReply        deploy_code (diff)
  tail        TailArgs        TailReply        opsrunner logs
  facts       FactsArgs       FactsReply       setup
  fs_stat     FsStatArgs      FsStatReply      stat
  fs_put      FsPutArgs       FsPutReply       copy, template
  fs_file     FsFileArgs      FsFileReply      file
  lineinfile  LineInFileArgs  LineInFileReply  lineinfile
  wait_for    WaitForArgs     WaitForReply     wait_for
  exec        ExecArgs        ExecReply        shell, command (the payload is the command's stdin)
  releases    ReleasesArgs    ReleasesReply    deploy_code (releases: true), rollback (the release list)
  release     ReleaseArgs     ReleaseReply     deploy_code (releases: true; a tar stream as the payload)
  rollback    RollbackArgs    RollbackReply    rollback (stop, switch current, relaunch the last good run, verify)

Every reply may carry ErrorReply's keys instead of (or besides) its own.
"""

from __future__ import annotations

MAGIC = b"\0opsrunner-agent\0"
PROTOCOL = 2
#: Written by the start script when the target's cache has no copy of this version.
NEED_SOURCE = b"\0opsrunner-agent-needs-source\0"
#: The package's name on the target (importable without the controller's `opsrunner`).
PACKAGE = "opsrunner_agent"

HEAD_SIZE = 5
MAX_JSON = 64 << 20  # bounded reads: a larger frame is a protocol error, never buffered
MAX_DATA = 1 << 20
#: The controller's payload chunks (D frames) are at most this big.
CHUNK = MAX_DATA

JSON, ACK, KEEP, DATA, END = b"J", b"A", b"K", b"D", b"E"


def frame(kind: bytes, body: bytes) -> bytes:
    return kind + len(body).to_bytes(4, "big") + body


def frame_size(head: bytes) -> int:
    """The body's length announced by a frame's 5-byte head."""
    return int.from_bytes(head[1:5], "big")


def package_digest_input(sources: dict[str, bytes]) -> bytes:
    """What the agent's version digests: each module's file name and bytes, sorted by name."""
    return b"".join(name.encode("utf-8") + b"\0" + sources[name] + b"\0" for name in sorted(sources))

# -- the messages' types ----------------------------------------------------------------------
# For mypy only: TYPE_CHECKING is False when the agent runs, so nothing below is executed and
# the agent never imports typing. Each op's request is `<Op>Args` and its reply `<Op>Reply`
# (the table in the module docstring). Every reply may also carry ErrorReply's keys: an op
# that fails raises, and the dispatcher (agent.py) replies {"error": ...} alone ("refused"
# too for a guard's refusal); the server (server.py) replies {"timed_out": true, "error": ...}
# for an op that ran past its deadline.
#
# The types describe the values as the agent builds them. JSON changes two things on the way
# to the controller: a tuple arrives as a list (verify's Check), and an int key as a string
# (GpuMemory, and Check's GPU reading).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Literal, Tuple, TypedDict, Union

    #: A value as JSON carries it: only where a field is free-form.
    JSONValue = Union[str, int, float, bool, None, List["JSONValue"], Dict[str, "JSONValue"]]
    JSONObject = Dict[str, JSONValue]
    #: MB of GPU memory used, by GPU index (a JSON object's keys are strings on the controller).
    GpuMemory = Dict[int, float]
    #: What a verify check saw: a process count, a phrase, or the GPU memory per GPU.
    CheckValue = Union[int, str, GpuMemory]
    #: A verify check: (name, passed, expected, actual); a JSON array [name, ok, expected, actual].
    Check = Tuple[str, bool, str, CheckValue]

    class ErrorReply(TypedDict, total=False):
        """Keys any reply may carry: why the op failed, the guard rules that refused it, and
        whether it was stopped at its deadline."""
        error: str
        refused: list[str]
        timed_out: bool

    class Request(TypedDict):
        """One request frame (J) from the controller: an op, its args, its deadline, and
        whether a payload (D frames, then E) follows."""
        op: str
        args: JSONObject
        timeout: float | None
        payload: bool

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
        #: [pid, start] of the job's supervisor (a JSON array).
        supervisor: list[int | None] | None
        #: Why the launch failed (the job never started).
        error: str
        #: The launch's extra environment and directory (0600 file: env may hold secrets).
        env: dict[str, str]
        chdir: str | None
        umask: str | None
        #: The release the launch resolved release_link to (releases: true), and its commit.
        release: str | None
        release_dir: str | None
        commit: str | None

    # -- kill, select -------------------------------------------------------------------------
    class KillArgs(Selector, total=False):
        signal: str
        grace: float
        check_mode: bool

    class _KillReplyBase(ErrorReply):
        changed: bool
        killed: list[ProcInfo]
        #: The pidfile's pid and the pattern's matches (check mode: what a later verify skips).
        main: list[int]

    class KillReply(_KillReplyBase, total=False):
        #: Pids that needed SIGKILL after the grace.
        forced: list[int]
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

    # -- clear_cache --------------------------------------------------------------------------
    class _ClearArgsBase(TypedDict):
        paths: list[str]

    class ClearArgs(_ClearArgsBase, total=False):
        max_matches: int
        check_mode: bool

    class Removed(TypedDict):
        path: str
        bytes: int
        files: int

    class ClearReply(ErrorReply, total=False):
        changed: bool
        removed: list[Removed]
        bytes: int

    # -- deploy_code: stat, write, delete, read -----------------------------------------------
    class _StatArgsBase(TypedDict):
        dest: str
        files: list[str]

    class StatArgs(_StatArgsBase, total=False):
        list_extra: bool
        exclude: list[str]

    class FileDigest(TypedDict):
        sha256: str
        mode: int
        size: int

    class OtherFile(TypedDict):
        """A path that is there but is not a regular file."""
        type: Literal["other"]

    class StatReply(ErrorReply):
        #: Per file asked for: its digest, "other", or None when absent.
        files: dict[str, FileDigest | OtherFile | None]
        #: Files under dest not asked for (list_extra).
        extra: list[str]

    class _WriteArgsBase(TypedDict):
        dest: str

    class WriteArgs(_WriteArgsBase, total=False):
        """The files come as a tar stream, the request's payload."""
        backup: bool

    class WriteReply(ErrorReply):
        written: list[str]
        backups: list[str]

    class DeleteArgs(TypedDict):
        dest: str
        files: list[str]

    class DeleteReply(ErrorReply):
        removed: list[str]

    class _ReadArgsBase(TypedDict):
        paths: list[str]

    class ReadArgs(_ReadArgsBase, total=False):
        limit: int

    class ReadReply(ErrorReply):
        #: Per path: its text, or None (absent, binary, or over limit).
        contents: dict[str, str | None]

    # -- opsrunner logs -----------------------------------------------------------------------
    class _TailArgsBase(TypedDict):
        log: str

    class TailArgs(_TailArgsBase, total=False):
        pidfile: str | None
        lines: int
        #: Follow: the offset read up to; the reply has what was appended since.
        since: int

    class TailReply(ErrorReply, total=False):
        text: str
        #: The offset the next `since` starts from.
        end: int
        #: Bytes left out between `since` and the window read.
        skipped: int
        #: No log (yet).
        missing: bool

    # -- setup --------------------------------------------------------------------------------
    class FactsArgs(TypedDict):
        pass

    class PythonVersion(TypedDict):
        major: int
        minor: int
        micro: int

    class PythonFacts(TypedDict):
        executable: str
        version: PythonVersion

    class NvidiaGpu(TypedDict):
        index: int
        name: str
        uuid: str
        memory_total_mb: int
        memory_used_mb: int
        utilization_pct: int | None

    class Facts(TypedDict):
        hostname: str
        fqdn: str
        nodename: str
        user_id: str
        user_uid: int
        user_dir: str
        system: str
        kernel: str
        architecture: str
        distribution: str
        distribution_version: str
        os_family: str
        processor_vcpus: int | None
        python_version: str
        python: PythonFacts
        nvidia_gpus: list[NvidiaGpu]

    class FactsReply(ErrorReply):
        facts: Facts

    # -- stat, copy, template, file, lineinfile, wait_for -------------------------------------
    class _FsStatArgsBase(TypedDict):
        path: str

    class FsStatArgs(_FsStatArgsBase, total=False):
        follow: bool
        checksum: bool

    class _FsStatInfoBase(TypedDict):
        exists: bool

    class FsStatInfo(_FsStatInfoBase, total=False):
        """ansible's stat keys; all but "exists" only for a path that exists."""
        path: str
        mode: str
        isdir: bool
        isreg: bool
        islnk: bool
        size: int
        uid: int
        gid: int
        pw_name: str
        gr_name: str
        mtime: float
        lnk_source: str
        lnk_target: str
        checksum: str

    class FsStatReply(ErrorReply):
        stat: FsStatInfo

    class _FsPutArgsBase(TypedDict):
        dest: str
        content_b64: str

    class FsPutArgs(_FsPutArgsBase, total=False):
        mode: str | None
        owner: str | None
        group: str | None
        backup: bool
        check: bool
        diff: bool

    class _FsPutReplyBase(ErrorReply):
        checksum: str
        dest: str
        changed: bool

    class FsPutReply(_FsPutReplyBase, total=False):
        #: diff: the text before (only when it changes).
        before: str
        backup_file: str

    class _FsFileArgsBase(TypedDict):
        path: str
        state: str

    class FsFileArgs(_FsFileArgsBase, total=False):
        src: str | None
        mode: str | None
        owner: str | None
        group: str | None
        check: bool

    class FsFileReply(ErrorReply):
        changed: bool
        path: str
        state: str

    class _LineInFileArgsBase(TypedDict):
        path: str

    class LineInFileArgs(_LineInFileArgsBase, total=False):
        line: str | None
        regexp: str | None
        insertafter: str | None
        insertbefore: str | None
        create: bool | None
        backup: bool | None
        state: str | None
        mode: str | None
        check: bool

    class _LineInFileReplyBase(ErrorReply):
        changed: bool
        msg: str

    class LineInFileReply(_LineInFileReplyBase, total=False):
        before: str
        after: str
        backup_file: str

    class WaitForArgs(TypedDict, total=False):
        host: str | None
        port: int | None
        path: str | None
        state: str | None
        search_regex: str | None
        delay: float | None
        sleep: float | None
        timeout: float

    class WaitForReply(ErrorReply):
        ok: bool
        elapsed: float

    # -- shell, command -----------------------------------------------------------------------
    class _ExecArgsBase(TypedDict):
        argv: list[str]

    class ExecArgs(_ExecArgsBase, total=False):
        """The command's stdin is the request's payload."""
        cwd: str | None
        timeout: float | None

    class _ExecReplyBase(TypedDict):
        #: The output's bytes as latin-1 text (bytes through JSON, unchanged).
        stdout: str
        stderr: str
        warnings: list[str]
        rc: int
        #: The command ran past its timeout and was killed with its tree (rc 124).
        timed_out: bool

    class ExecReply(_ExecReplyBase, total=False):
        """ErrorReply's keys, but timed_out always there."""
        error: str
        refused: list[str]
        #: Bytes read past the kept 16 MiB of each stream.
        dropped_stdout: int
        dropped_stderr: int

    # -- releases and rollback (deploy_code releases: true, rollback) -------------------------
    class ReleaseInfo(TypedDict):
        """A release directory under <dest>/releases, oldest first in a list."""
        name: str
        commit: str | None
        created: float | None

    class _ReleasesArgsBase(TypedDict):
        dest: str

    class ReleasesArgs(_ReleasesArgsBase, total=False):
        #: The job's pidfile: its running release and last good run are reported too.
        pidfile: str

    class _ReleasesReplyBase(ErrorReply):
        releases: list[ReleaseInfo]
        #: The release <dest>/current points to (None: no link yet).
        current: str | None

    class ReleasesReply(_ReleasesReplyBase, total=False):
        running: str | None
        good: str | None

    class _ReleaseArgsBase(TypedDict):
        dest: str
        name: str
        #: Every file of the release: {relative path: mode}; those not in the payload are
        #: hard-linked from `base` (their content and mode are the same there).
        files: dict[str, int]

    class ReleaseArgs(_ReleaseArgsBase, total=False):
        base: str | None
        commit: str | None
        dirty: bool
        source: str
        keep: int
        pidfile: str

    class ReleaseReply(ErrorReply):
        release: str
        release_dir: str
        written: int
        linked: int
        previous: str | None
        pruned: list[str]
        #: Releases past `keep` that were kept, and why (running, last good, in use by pid N).
        spared: dict[str, str]

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

    class _RollbackArgsBase(TypedDict):
        pidfile: str

    class RollbackArgs(_RollbackArgsBase, total=False):
        #: A release name, "previous" (the one before current), or absent: the last good run's.
        release: str
        #: Auto (after a failed restart): nothing is done while the last good run still runs.
        auto: bool
        pattern: str
        grace: float
        #: The checks the relaunched run must pass (verify's args, its pidfile set here).
        verify: VerifyArgs
        check_mode: bool
        #: Seconds the whole rollback may take (the task timeout less the controller's margin).
        budget: float

    class RollbackReply(ErrorReply, total=False):
        #: What happened: "nothing" (the good run still runs), "no_good_run", "would", "rolled_back", "failed".
        outcome: str
        release: str | None
        commit: str | None
        pid: int | None
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

    #: Any op's reply (the dispatcher's type).
    Reply = Union[ErrorReply, KillReply, SelectReply, LaunchReply, VerifyReply, GpuWaitReply, ClearReply,
                  StatReply, WriteReply, DeleteReply, ReadReply, TailReply, FactsReply, FsStatReply,
                  FsPutReply, FsFileReply, LineInFileReply, WaitForReply, ExecReply,
                  ReleasesReply, ReleaseReply, RollbackReply]
    OpName = Literal["kill", "select", "launch", "verify", "gpu_wait", "clear", "stat", "write", "delete",
                     "read", "tail", "facts", "fs_stat", "fs_put", "fs_file", "lineinfile", "wait_for", "exec",
                     "releases", "release", "rollback"]
