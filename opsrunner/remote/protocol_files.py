"""The messages of the ops on files on the target (protocol.py has the table and the framing):
clear (clear_cache), deploy_code's stat, write, delete and read, tail (opsrunner logs), and
stat, copy/template, file, lineinfile and wait_for."""

from __future__ import annotations

# For mypy only, as protocol.py's types: nothing below runs on the agent.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal, TypedDict

    from .protocol import ErrorReply

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
        #: A directory deploy: say whether dest holds deploy_code's releases, and which
        #: release dest/current points to.
        releases: bool

    class FileDigest(TypedDict):
        sha256: str
        mode: int
        size: int

    class OtherFile(TypedDict):
        """A path that is there but is not a regular file."""
        type: Literal["other"]

    class _StatReplyBase(ErrorReply):
        #: Per file asked for: its digest, "other", or None when absent.
        files: dict[str, FileDigest | OtherFile | None]
        #: Files under dest not asked for (list_extra).
        extra: list[str]

    class StatReply(_StatReplyBase, total=False):
        #: `releases`: dest/releases where it is deploy_code's releases (never listed in extra).
        releases: str
        #: `releases`: the release dest/current points to, where it is such a link.
        current: str

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

    # -- releases (deploy_code releases: true) ------------------------------------------------
    class _ReleaseInfoBase(TypedDict):
        name: str
        commit: str | None
        created: float | None

    class ReleaseInfo(_ReleaseInfoBase, total=False):
        """A release directory under <dest>/releases, oldest first in a list."""
        #: Its manifest is there but cannot be used (corrupt, too large, not a regular file):
        #: "release manifest M is not valid JSON (...)". Its commit and time are then its
        #: name's, and a rollback to it is refused (its files' digests cannot be checked).
        manifest_problem: str

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
        #: {relative path: sha256} of every file: a file of `base` is linked only when its
        #: digest is this one still (it may have changed since the controller's stat).
        sha256: dict[str, str]
        base: str | None
        commit: str | None
        dirty: bool
        source: str
        keep: int
        pidfile: str

    class ReleaseReply(ErrorReply, total=False):
        #: With "error": files of `base` whose content or mode is no longer the one expected
        #: (nothing was made; the controller sends them and tries again).
        stale: list[str]
        release: str
        release_dir: str
        written: int
        linked: int
        previous: str | None
        pruned: list[str]
        #: Releases past `keep` that were kept, and why (running, last good, in use by pid N).
        spared: dict[str, str]
        #: What the scan of /proc for processes using the releases pruned could not see ("2
        #: processes of other users judged by the command line only"); absent where it saw all.
        scan_limits: str

    class _UnlinkCurrentArgsBase(TypedDict):
        dest: str

    class UnlinkCurrentArgs(_UnlinkCurrentArgsBase, total=False):
        """A plain deploy into dest: remove dest/current where it points to a release."""
        #: The job's pidfile: its launch record beside it, and those of other jobs.
        pidfile: str
        #: The pidfile's job is stopped next (the restart's kill_old): its processes (its tree as
        #: kill_old selects it) do not keep `current`. Without it they do: the job still runs.
        stop_follows: bool
        check_mode: bool

    class UnlinkCurrentReply(ErrorReply, total=False):
        #: The release dest/current points to (None: no such link, nothing done).
        release: str | None
        link: str
        #: It was removed (check mode: it would be).
        unlinked: bool
        #: Why it stays: another job runs from that release ("pid N (its environment:
        #: PYTHONPATH) uses it"), or which processes do cannot be told.
        kept: str
        #: What the scan of /proc could not see ("2 processes of other users judged by the
        #: command line only"); absent where it saw every process.
        scan_limits: str
