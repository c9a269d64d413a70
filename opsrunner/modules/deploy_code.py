"""deploy_code: send only what differs (checksums compared on the host); each file lands atomically."""

from __future__ import annotations

import contextlib
import json
import posixpath
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.modules.codefiles import LocalFile, collect, differs, files_diff, parse_mode, tar_of
from opsrunner.modules.releasing import deploy_release
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import (
        DeleteArgs,
        ReadArgs,
        StatArgs,
        StatReply,
        UnlinkCurrentArgs,
        WriteArgs,
        WriteReply,
    )


#: deploy_code releases' own paths under dest (remote/releases.py): a plain deploy never writes there.
_RELEASE_PATHS = ("releases", "current")

#: Beside a job's lock (train.lock): its pidfile and records (remote/jobfiles.py).
_JOB_FILE_SUFFIXES = (".lock", ".pid", ".exit", ".launch.json", ".good.json")


def _locked_job_files(ctx: TaskContext, root: str, extra: list[str]) -> list[str]:
    """The extra files under dest that `delete` must leave: the lock, pidfile and records of
    a job this run holds the lock of (a dest that holds the job's own files would otherwise
    lose them: the run's lock, and what tells the next run which job is running)."""
    bases = [lock[:-len(".lock")] if lock.endswith(".lock") else lock for lock in ctx.connection.agent().locks]
    if not extra or not bases:
        return []
    guarded = {posixpath.normpath(base + suffix) for base in bases for suffix in _JOB_FILE_SUFFIXES}
    asked: ReadArgs = {"paths": [base + ".launch.json" for base in bases]}
    for record in ctx.agent(ops.READ, asked)["contents"].values():  # and the log the job writes
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):  # no record yet, or not ours
            guarded.add(posixpath.normpath(json.loads(record or "{}")["log"]))
    return [e for e in extra if posixpath.normpath(posixpath.join(root, e)) in guarded]


def _drop_current(ctx: TaskContext, args: dict[str, Any], root: str, data: dict[str, Any]) -> str:
    """A plain deploy of a directory whose dest/current links to a release (the STAT said so):
    the job runs from root itself, not from a release, so that link would say an old release
    is current. It is removed (check mode: would be; the releases stay), unless another job
    runs from that release. The message's part saying so."""
    asked: UnlinkCurrentArgs = {"dest": root, "check_mode": ctx.check_mode}
    if args.get("pidfile"):
        asked["pidfile"] = str(args["pidfile"])
        asked["stop_follows"] = bool(args.get("stop_follows"))
    reply = ctx.agent(ops.UNLINK_CURRENT, asked)
    release, link = reply.get("release"), reply.get("link")
    if not release:
        return ""
    limits = f"; {reply['scan_limits']}" if reply.get("scan_limits") else ""
    if limits:
        data["scan_limits"] = reply["scan_limits"]
    if reply.get("kept"):
        data["current_kept"] = reply["kept"]
        return f"; current ({link} -> release {release}) kept: {reply['kept']}{limits}"
    data["unlinked"], data["unlinked_release"] = link, release
    return (f"; {'would remove' if ctx.check_mode else 'removed'} current ({link} -> release {release}): the code "
            f"deployed in place is no release, so none is current (the releases stay){limits}")


def _into_releases(files: list[LocalFile], remote: StatReply, src: Path) -> None:
    """A plain deploy whose src has a top-level releases/ or current, into a dest that holds
    deploy_code's releases, would write into them: refused before anything is written."""
    folder = remote.get("releases")
    clash = next((f.rel for f in files if f.rel.split("/", 1)[0] in _RELEASE_PATHS), None)
    if folder and clash:
        top, dest = clash.split("/", 1)[0], posixpath.dirname(folder)
        raise ModuleFailure(f"refusing to deploy {src / clash} to {posixpath.join(dest, clash)}: {dest} holds "
                            f"deploy_code's releases ({folder}/ and the current link), and {dest}/{top} is theirs: "
                            f"a plain deploy would write into them. Rename {top} in src or deploy to another dest "
                            "(nothing was written)")


def _after(ctx: TaskContext, args: dict[str, Any], root: str, remote: StatReply, data: dict[str, Any],
           delete: bool) -> str:
    """What a directory deploy says of the releases in dest: the `current` it removed or kept,
    and that delete left releases/ alone."""
    text = f"; left {remote['releases']}/ alone (deploy_code's releases)" if delete and remote.get("releases") else ""
    return text + (_drop_current(ctx, args, root, data) if remote.get("current") else "")


class DeployCodeModule(Module):
    name = "deploy_code"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        src = ctx.resolve_local(args["src"])
        if not src.exists():
            looked = ", ".join(map(str, ctx.task.search_dirs("files")))
            raise ModuleFailure(f"src {args['src']} not found (looked in {looked})")
        exclude = list(args.get("exclude") or [])
        root, files = collect(src, args["dest"], exclude, parse_mode(args.get("mode")))
        if args.get("releases"):
            return deploy_release(ctx, args, src, files)
        delete = bool(args.get("delete")) and src.is_dir()
        asked: StatArgs = {"dest": root, "files": [f.rel for f in files], "list_extra": delete, "exclude": exclude,
                           "releases": src.is_dir()}
        remote = ctx.agent(ops.STAT, asked)
        _into_releases(files, remote, src)
        changed = [f for f in files if differs(f, remote["files"].get(f.rel))]
        extra: list[str] = remote.get("extra", []) if delete else []
        kept = _locked_job_files(ctx, root, extra)
        extra = [e for e in extra if e not in kept]
        data: dict[str, Any] = {"changed_files": [f.rel for f in changed], "deleted_files": extra,
                                "dest": root, "files": len(files)}
        diff = files_diff(ctx, root, changed, extra) if ctx.diff_mode else ""
        if not changed and not extra:
            current = _after(ctx, args, root, remote, data, delete)
            return TaskResult(Status.CHANGED if "unlinked" in data else Status.OK, changed="unlinked" in data,
                              msg=f"{len(files)} files up to date in {root}{current}", data=data)
        if ctx.check_mode:
            ctx.ledger.would_create.extend(posixpath.join(root, f.rel) for f in changed)
        else:
            if changed:
                reply = self._send(ctx, root, changed, bool(args.get("backup")))
                data["backups"] = reply.get("backups", [])
            if extra:
                doomed: DeleteArgs = {"dest": root, "files": extra}
                ctx.agent(ops.DELETE, doomed)
        verb = "would deploy" if ctx.check_mode else "deployed"
        msg = f"{verb} {len(changed)} of {len(files)} files to {root}"
        if changed:
            msg += ": " + ", ".join(f.rel for f in changed[:10]) + (" ..." if len(changed) > 10 else "")
        if extra:
            msg += f"; {'would delete' if ctx.check_mode else 'deleted'} {len(extra)}: {', '.join(extra[:10])}"
        if kept:
            msg += f"; kept {', '.join(kept)} (the files of a job this run holds the lock of)"
        msg += _after(ctx, args, root, remote, data, delete)  # after the files landed: a failed write leaves current
        return TaskResult(Status.CHANGED, changed=True, msg=msg, diff=diff, data=data)

    def _send(self, ctx: TaskContext, root: str, files: list[LocalFile], backup: bool) -> WriteReply:
        request: WriteArgs = {"dest": root, "backup": backup}
        with tar_of(files) as payload:
            return ctx.agent(ops.WRITE, request, payload=payload)


MODULE = DeployCodeModule()
