"""deploy_code: send only what differs (checksums compared on the host); each file lands atomically."""

from __future__ import annotations

import contextlib
import json
import posixpath
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
        UnlinkCurrentArgs,
        WriteArgs,
        WriteReply,
    )


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
    """A plain deploy of a directory: the job runs from root itself, not from a release, so a
    root/current left by release deploys would say an old release is current. It is removed
    (check mode: would be; the releases stay), unless another job runs from that release.
    The message's part saying so ("" where there is no such link)."""
    asked: UnlinkCurrentArgs = {"dest": root, "check_mode": ctx.check_mode}
    if args.get("pidfile"):
        asked["pidfile"] = str(args["pidfile"])
    reply = ctx.agent(ops.UNLINK_CURRENT, asked)
    release, link = reply.get("release"), reply.get("link")
    if not release:
        return ""
    if reply.get("kept"):
        data["current_kept"] = reply["kept"]
        return f"; current ({link} -> release {release}) kept: {reply['kept']}"
    data["unlinked"], data["unlinked_release"] = link, release
    return (f"; {'would remove' if ctx.check_mode else 'removed'} current ({link} -> release {release}): the code "
            "deployed in place is no release, so none is current (the releases stay)")


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
        asked: StatArgs = {"dest": root, "files": [f.rel for f in files], "list_extra": delete, "exclude": exclude}
        remote = ctx.agent(ops.STAT, asked)
        changed = [f for f in files if differs(f, remote["files"].get(f.rel))]
        extra: list[str] = remote.get("extra", []) if delete else []
        kept = _locked_job_files(ctx, root, extra)
        extra = [e for e in extra if e not in kept]
        data: dict[str, Any] = {"changed_files": [f.rel for f in changed], "deleted_files": extra,
                                "dest": root, "files": len(files)}
        diff = files_diff(ctx, root, changed, extra) if ctx.diff_mode else ""
        if not changed and not extra:
            current = _drop_current(ctx, args, root, data) if src.is_dir() else ""
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
        if src.is_dir():  # after the files landed: a deploy that failed to write leaves `current` as it was
            msg += _drop_current(ctx, args, root, data)
        return TaskResult(Status.CHANGED, changed=True, msg=msg, diff=diff, data=data)

    def _send(self, ctx: TaskContext, root: str, files: list[LocalFile], backup: bool) -> WriteReply:
        request: WriteArgs = {"dest": root, "backup": backup}
        with tar_of(files) as payload:
            return ctx.agent(ops.WRITE, request, payload=payload)


MODULE = DeployCodeModule()
