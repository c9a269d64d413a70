"""deploy_code: send only what differs (checksums compared on the host); each file lands atomically."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import posixpath
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from opsrunner.connections import ops
from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_files import (
        DeleteArgs,
        FileDigest,
        OtherFile,
        ReadArgs,
        StatArgs,
        WriteArgs,
        WriteReply,
    )

SPOOL_IN_MEMORY = 8 << 20  # larger transfers spill to a temp file, never held twice in memory


@dataclass(frozen=True)
class LocalFile:
    rel: str
    path: Path
    sha256: str
    mode: int


def excluded(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_mode(value: Any) -> int | None:
    if value is None:
        return None
    return int(str(value), 8) if isinstance(value, str) else int(value)


def collect(src: Path, dest: str, exclude: list[str], mode: int | None) -> tuple[str, list[LocalFile]]:
    """The remote root directory and the local files to deploy under it."""
    if src.is_file():
        if dest.endswith("/"):
            root, rels = dest.rstrip("/") or "/", [(src.name, src)]
        else:
            root, rels = posixpath.dirname(dest) or ".", [(posixpath.basename(dest), src)]
    else:
        root = dest.rstrip("/") or "/"
        rels = [(p.relative_to(src).as_posix(), p) for p in sorted(src.rglob("*")) if p.is_file()]
    files = [LocalFile(rel, path, _sha256(path), mode if mode is not None else stat.S_IMODE(path.stat().st_mode))
             for rel, path in rels if not excluded(rel, exclude)]
    return root, files


class DeployCodeModule(Module):
    name = "deploy_code"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        src = ctx.resolve_local(args["src"])
        if not src.exists():
            looked = ", ".join(map(str, ctx.task.search_dirs("files")))
            raise ModuleFailure(f"src {args['src']} not found (looked in {looked})")
        exclude = list(args.get("exclude") or [])
        root, files = collect(src, args["dest"], exclude, parse_mode(args.get("mode")))
        delete = bool(args.get("delete")) and src.is_dir()
        asked: StatArgs = {"dest": root, "files": [f.rel for f in files], "list_extra": delete, "exclude": exclude}
        remote = ctx.agent(ops.STAT, asked)
        changed = [f for f in files if _differs(f, remote["files"].get(f.rel))]
        extra: list[str] = remote.get("extra", []) if delete else []
        data: dict[str, Any] = {"changed_files": [f.rel for f in changed], "deleted_files": extra,
                                "dest": root, "files": len(files)}
        diff = self._diff(ctx, root, changed, extra) if ctx.diff_mode else ""
        if not changed and not extra:
            return TaskResult(Status.OK, msg=f"{len(files)} files up to date in {root}", data=data)
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
        return TaskResult(Status.CHANGED, changed=True, msg=msg, diff=diff, data=data)

    def _send(self, ctx: TaskContext, root: str, files: list[LocalFile], backup: bool) -> WriteReply:
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            with tarfile.open(fileobj=spool, mode="w|") as tar:
                for f in files:
                    info = tarfile.TarInfo(f.rel)
                    info.size = f.path.stat().st_size
                    info.mode = f.mode
                    with f.path.open("rb") as fh:
                        tar.addfile(info, fh)
            spool.seek(0)
            request: WriteArgs = {"dest": root, "backup": backup}
            return ctx.agent(ops.WRITE, request, payload=cast(IO[bytes], spool))

    def _diff(self, ctx: TaskContext, root: str, changed: list[LocalFile], extra: list[str]) -> str:
        paths = [posixpath.join(root, f.rel) for f in changed] + [posixpath.join(root, e) for e in extra]
        if not paths:
            return ""
        request: ReadArgs = {"paths": paths}
        old = ctx.agent(ops.READ, request)["contents"]
        out = []
        for f in changed:
            remote_path = posixpath.join(root, f.rel)
            try:
                new = f.path.read_text("utf-8")
            except UnicodeDecodeError:
                out.append(f"Binary file {remote_path} differs\n")
                continue
            before = old.get(remote_path) or ""
            out += difflib.unified_diff(before.splitlines(True), new.splitlines(True),
                                        f"{remote_path} (before)", f"{remote_path} (after)")
        for e in extra:
            out.append(f"deleted: {posixpath.join(root, e)}\n")
        return "".join(out)


def _differs(local: LocalFile, remote: FileDigest | OtherFile | None) -> bool:
    if remote is None or "type" in remote:  # missing, or not a regular file there
        return True
    return remote["sha256"] != local.sha256 or remote["mode"] != local.mode


MODULE = DeployCodeModule()
