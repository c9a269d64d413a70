"""deploy_code with `releases: true`: each deploy a release directory of its own under
<dest>/releases, named by its UTC time and the git commit of src, made on the target by
remote/releases.py (unchanged files hard-linked from the current release), then
<dest>/current switched to it."""

from __future__ import annotations

import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.gitrepo import run_git
from opsrunner.modules.base import TaskContext
from opsrunner.modules.codefiles import LocalFile, differs, files_diff, tar_of
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import ReleaseArgs, ReleaseReply, ReleasesArgs, ReleasesReply, StatArgs

#: time.strftime format of a release's name (UTC), e.g. 20261201T030000Z-1a2b3c4.
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def release_name(when: float, commit: str | None) -> str:
    """A release's name: its UTC time, then the git short commit where there is one. The
    target adds .2, .3 ... to the time when two deploys fall in the same second."""
    stamp = time.strftime(STAMP_FORMAT, time.gmtime(when))
    return f"{stamp}-{commit}" if commit else stamp


def git_commit(src: Path) -> tuple[str | None, bool]:
    """(the short commit of the git checkout holding src, whether src has uncommitted changes
    there); (None, False) when src is not in a git checkout or git is missing."""

    def git(*argv: str) -> str | None:
        res = run_git(src, *argv)
        return res.stdout.strip() if res is not None and res.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return None, False
    return commit, bool(git("status", "--porcelain", "--", "."))


def deploy_release(ctx: TaskContext, args: dict[str, Any], src: Path, files: list[LocalFile]) -> TaskResult:
    """Make a new release of src's files (or say the current one has them all already)."""
    if not src.is_dir():
        raise ModuleFailure(f"releases: true deploys a directory; src {args['src']} is a file")
    dest = str(args["dest"]).rstrip("/") or "/"
    asked_releases: ReleasesArgs = {"dest": dest}
    listing = ctx.agent(ops.RELEASES, asked_releases)
    result = _deploy_release(ctx, args, src, files, dest, listing)
    return _with_manifest_problems(result, listing)


def _with_manifest_problems(result: TaskResult, listing: ReleasesReply) -> TaskResult:
    """The releases whose manifest is there but cannot be used, in the result's data
    (unusable_manifests: {release: why}) and a warning each: a rollback to one is refused."""
    pruned = set(result.data.get("pruned") or ())  # removed by this deploy: no longer a concern
    problems = {r["name"]: r["manifest_problem"] for r in listing["releases"]
                if r.get("manifest_problem") and r["name"] not in pruned}
    if problems:
        result.data["unusable_manifests"] = problems
        result.warnings.extend(f"release {name}: {why}; a rollback to it is refused (its files cannot be checked)"
                               for name, why in sorted(problems.items()))
    return result


def _deploy_release(ctx: TaskContext, args: dict[str, Any], src: Path, files: list[LocalFile], dest: str,
                    listing: ReleasesReply) -> TaskResult:
    current = listing["current"]
    changed, extra = list(files), list[str]()
    if current:
        asked: StatArgs = {"dest": posixpath.join(dest, "releases", current), "files": [f.rel for f in files],
                           "list_extra": True, "exclude": list(args.get("exclude") or [])}
        remote = ctx.agent(ops.STAT, asked)
        changed = [f for f in files if differs(f, remote["files"].get(f.rel))]
        extra = remote.get("extra", [])
    data: dict[str, Any] = {"dest": dest, "files": len(files), "changed_files": [f.rel for f in changed],
                            "deleted_files": [], "previous": current, "release": current}
    shown = posixpath.join(dest, "current")  # -D: against the current release, seen through <dest>/current
    base = posixpath.join(dest, "releases", current) if current else shown
    diff = files_diff(ctx, base, changed, extra, shown) if ctx.diff_mode else ""
    if current and not changed and not extra:
        return TaskResult(Status.OK, data=data, msg=f"{len(files)} files up to date in release {current} "
                          f"({dest}/current)")
    commit, dirty = git_commit(src)
    name = release_name(time.time(), commit)
    data.update(release=name, commit=commit, dirty=dirty)
    linked = len(files) - len(changed) if current else 0
    reuse = f" ({linked} hard-linked from {current})" if linked else ""
    if ctx.check_mode:
        for f in files:
            ctx.ledger.would_create += [posixpath.join(dest, "current", f.rel),
                                        posixpath.join(dest, "releases", name, f.rel)]
        return TaskResult(Status.CHANGED, changed=True, data=data, diff=diff,
                          msg=f"would deploy release {name}: {len(changed)} of {len(files)} files sent{reuse}; "
                              f"current -> {name}{_uncommitted(dirty)}")
    request: ReleaseArgs = {"dest": dest, "name": name, "files": {f.rel: f.mode for f in files},
                            "sha256": {f.rel: f.sha256 for f in files}, "base": current,
                            "commit": commit, "dirty": dirty, "source": str(src),
                            "keep": int(args.get("keep_releases", 5))}
    if args.get("pidfile"):
        request["pidfile"] = str(args["pidfile"])
    try:
        made = _send_release(ctx, request, changed)
    except ModuleFailure as exc:
        stale_files = exc.data.get("stale")  # base files edited since the stat: never linked
        stale = set(map(str, stale_files)) if isinstance(stale_files, list) else set()
        if not stale:
            raise
        changed += [f for f in files if f.rel in stale and f not in changed]
        made = _send_release(ctx, request, changed)
    data["changed_files"] = [f.rel for f in changed]
    result = _made(made, data, len(files), len(changed), current)
    result.diff, result.msg = diff, result.msg + _uncommitted(dirty)
    return result


def _uncommitted(dirty: bool) -> str:
    """A release made from uncommitted changes is not the code its commit names: said so."""
    return "; src has uncommitted changes: the release is not the code of its commit" if dirty else ""


def _send_release(ctx: TaskContext, request: ReleaseArgs, changed: list[LocalFile]) -> ReleaseReply:
    with tar_of(changed) as payload:  # an empty stream when every file is linked from the current release
        return ctx.agent(ops.RELEASE, request, payload=payload)


def _made(reply: ReleaseReply, data: dict[str, Any], total: int, sent: int, current: str | None) -> TaskResult:
    name = reply["release"]
    data.update(release=name, release_dir=reply["release_dir"], linked=reply["linked"], pruned=reply["pruned"],
                spared=reply["spared"])
    msg = f"deployed release {name}: {sent} of {total} files sent"
    if reply["linked"]:
        msg += f" ({reply['linked']} hard-linked from {current})"
    msg += f"; current -> {name}"
    if reply["pruned"]:
        msg += f"; removed {len(reply['pruned'])} old: {', '.join(reply['pruned'])}"
        if reply.get("scan_limits"):  # what the scan for processes using them could not see
            data["scan_limits"] = reply["scan_limits"]
            msg += f" ({reply['scan_limits']})"
    if reply["spared"]:
        msg += "; kept past keep_releases: " + ", ".join(f"{n} ({why})" for n, why in sorted(reply["spared"].items()))
    return TaskResult(Status.CHANGED, changed=True, msg=msg, data=data)
