# opsrunner-agent part 4: clear_cache and deploy_code on the target.
# Heavier modules (glob, hashlib, shutil, tarfile) are imported where used: most calls need none.
from __future__ import annotations

import errno
import os
import stat
import sys
import time

from .atomic import create_temp_beside
from .guards import (
    Context,
    Refused,
    guard_delete_root,
    guard_glob,
    guard_glob_match,
    guard_path,
    has_glob,
    remove,
    tree_usage,
)

#: deploy_code releases' layout under dest (releases.py): the releases' folder and the link
#: to the current one.
RELEASES = "releases"
CURRENT = "current"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from _hashlib import HASH
    from typing import Callable

    from .protocol_files import (
        ClearArgs,
        ClearReply,
        DeleteArgs,
        DeleteReply,
        FileDigest,
        OtherFile,
        ReadArgs,
        ReadReply,
        Removed,
        StatArgs,
        StatReply,
        WriteArgs,
        WriteReply,
    )


def op_clear(args: ClearArgs) -> ClearReply:
    if not os.environ.get("USER"):
        import pwd
        os.environ["USER"] = pwd.getpwuid(os.getuid()).pw_name
    ctx = Context()
    limit = int(args.get("max_matches", 20))
    targets: list[str] = []
    refused: list[str] = []
    rules: list[str] = []
    for pattern in args["paths"]:
        try:
            matches = _clear_matches(pattern, limit, ctx)
        except Refused as exc:
            refused.append(str(exc))
            rules.append(exc.rule)
            continue
        targets.extend(m for m in matches if m not in targets)
    removed: list[Removed] = []
    for path in targets:  # sized (and checked for mounts below) before anything is removed
        try:
            size, files = tree_usage(path)
        except Refused as exc:
            refused.append(str(exc))
            rules.append(exc.rule)
            continue
        removed.append({"path": path, "bytes": size, "files": files})
    if refused:
        return {"error": "refusing to clear: " + "; ".join(refused) + " (nothing was removed)",
                "refused": rules}
    if not args.get("check_mode"):
        for entry in removed:
            remove(entry["path"])
    return {"changed": bool(removed), "removed": removed, "bytes": sum(r["bytes"] for r in removed)}


def _clear_matches(pattern: str, limit: int, ctx: Context) -> list[str]:
    """The real paths a clear_cache pattern removes; Refused names the rule that fired."""
    expanded = os.path.expandvars(os.path.expanduser(pattern))
    if has_glob(expanded):
        guard_glob(pattern, "delete", ctx=ctx)
    real = guard_path(pattern, "delete", ctx=ctx)
    if not has_glob(expanded):
        return [real] if os.path.lexists(real) else []
    import glob
    matches = sorted(glob.glob(expanded))
    if len(matches) > limit:
        raise Refused("max-matches", f"{pattern!r} matches {len(matches)} entries (more than max_matches={limit})")
    return [guard_glob_match(pattern, match, "delete", ctx=ctx) for match in matches]


# -- deploy_code -----------------------------------------------------------------------------
#: Bytes a process hashes with CPython's builtin sha1/sha256 before it loads hashlib: importing
#: hashlib loads OpenSSL, ~5 ms of every agent start or worker that needs one digest, while
#: the builtins hash ~200 MB/s against OpenSSL's ~1.5 GB/s.
BUILTIN_HASH_BUDGET = [4 << 20]


def _builtin_hash(name: str) -> Callable[[], HASH] | None:
    try:
        if name == "sha1":
            if TYPE_CHECKING:  # (the builtin modules have no type stubs: hashlib's have the same API)
                from hashlib import sha1
            else:
                from _sha1 import sha1
            return sha1
        if name == "sha256":
            if TYPE_CHECKING:
                from hashlib import sha256
            else:
                try:
                    from _sha256 import sha256  # Python <= 3.11
                except ImportError:
                    from _sha2 import sha256  # Python >= 3.12
            return sha256
    except ImportError:
        pass
    return None


def new_hash(name: str, size: int) -> HASH:
    """A hash object for about `size` bytes: builtin while the budget lasts, else hashlib's."""
    builtin = _builtin_hash(name) if size <= BUILTIN_HASH_BUDGET[0] else None
    if builtin is not None:
        BUILTIN_HASH_BUDGET[0] -= size
        return builtin()
    import hashlib
    return hashlib.new(name)


def data_digest(data: bytes, name: str) -> str:
    """Hex digest of bytes in memory."""
    h = new_hash(name, len(data))
    h.update(data)
    return h.hexdigest()


def file_digest(path: str, name: str) -> str:
    """Hex digest of a file read in 1 MiB chunks: sha256 for deploy_code, sha1 for stat/copy."""
    with open(path, "rb") as fh:
        h = new_hash(name, os.fstat(fh.fileno()).st_size)
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _excluded(rel: str, patterns: list[str]) -> bool:
    import fnmatch
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def op_stat(args: StatArgs) -> StatReply:
    """Checksums and modes of the files the controller wants to deploy, and extras under dest.

    Check mode sends no write or delete: what they would refuse is refused here, in both modes."""
    ctx = Context()
    root = os.path.realpath(args["dest"])
    for rel in args["files"]:  # refused here too, so check mode refuses what the run would
        guard_path(os.path.join(root, rel), "write", dest=root, ctx=ctx)
    dest = guard_delete_root(args["dest"], ctx) if args.get("list_extra") else root
    files: dict[str, FileDigest | OtherFile | None] = {}
    for rel in args["files"]:
        path = os.path.join(dest, rel) if rel else dest
        try:
            st = os.stat(path)
        except OSError:
            files[rel] = None
            continue
        if not stat.S_ISREG(st.st_mode):
            files[rel] = {"type": "other"}
            continue
        files[rel] = {"sha256": file_digest(path, "sha256"), "mode": stat.S_IMODE(st.st_mode), "size": st.st_size}
    extra = _extra_files(args, dest) if args.get("list_extra") else []
    for rel in extra:  # judged as op_delete judges them
        guard_path(os.path.join(dest, rel), "delete", dest=dest, ctx=ctx)
    reply: StatReply = {"files": files, "extra": extra}
    if args.get("releases") and holds_releases(dest):
        reply["releases"] = os.path.join(dest, RELEASES)
        current = linked_release(dest)
        if current:  # the plain deploy then removes it (op_unlink_current): asked only then
            reply["current"] = current
    return reply


def is_release_name(name: str) -> bool:
    """Whether a name has a release's form (releases.py): <UTC time>[.N][-commit], the time as
    20261201T030000Z (its digits checked here: no strptime, which loads re on the target)."""
    stamp = name[:16]
    return (len(stamp) == 16 and stamp[8] == "T" and stamp[15] == "Z" and (stamp[:8] + stamp[9:15]).isdigit()
            and stamp.isascii() and (len(name) == 16 or name[16] in ".-"))


def linked_release(dest: str) -> str | None:
    """The release dest/current points to (a directory in dest/releases), None when it is no
    such link."""
    link = os.path.join(dest, CURRENT)
    if not os.path.islink(link):
        return None
    top = os.path.join(os.path.realpath(dest), RELEASES) + "/"
    path = os.path.realpath(link)
    name = path[len(top):].split("/", 1)[0] if path.startswith(top) else ""
    return name if name and not name.startswith(".") else None


def holds_releases(dest: str) -> bool:
    """Whether dest/releases is deploy_code's releases (releases.py): it holds a release (a
    name of a release's form, a directory) beside its manifest (<name>.json), or current links
    to such a release. A folder of the code itself named releases/ (releases/2024.1/) is not."""
    folder = os.path.join(dest, RELEASES)
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    if is_release_name(linked_release(dest) or ""):
        return True
    try:
        names = set(os.listdir(folder))
    except OSError:
        return True  # unreadable: never taken for the code's extra files
    return any(is_release_name(name) and name + ".json" in names and os.path.isdir(os.path.join(folder, name))
               for name in names)


def _extra_files(args: StatArgs, dest: str) -> list[str]:
    """The files under dest that the controller does not deploy (and does not exclude), sorted.
    Never the releases of earlier release deploys into dest: a plain deploy with delete
    would take every release, the rollback's targets among them."""
    extra = []
    if os.path.isdir(dest):
        wanted = set(args["files"])
        spare_releases = holds_releases(dest)
        for folder, dirs, names in os.walk(dest):
            if spare_releases and folder == dest and RELEASES in dirs:
                dirs.remove(RELEASES)
            for name in names:
                rel = os.path.relpath(os.path.join(folder, name), dest)
                if rel not in wanted and not _excluded(rel, args.get("exclude") or []):
                    extra.append(rel)
    return sorted(extra)


def op_write(args: WriteArgs) -> WriteReply:
    """Unpack a tar stream from stdin; each file lands atomically (temp file + rename)."""
    import shutil
    import tarfile
    dest = os.path.realpath(args["dest"])
    ctx = Context()
    written: list[str] = []
    backups: list[str] = []
    stamp = time.strftime("%Y%m%d%H%M%S")
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                continue
            path = guard_path(os.path.join(dest, member.name), "write", dest=dest, ctx=ctx)
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            if args.get("backup") and os.path.isfile(path):
                shutil.copy2(path, f"{path}.{stamp}~")
                backups.append(f"{path}.{stamp}~")
            src = tar.extractfile(member)
            if src is None:
                continue  # (a regular file's member always has its data)
            fd, tmp = create_temp_beside(path)
            with os.fdopen(fd, "wb") as fh:
                shutil.copyfileobj(src, fh, 1 << 20)
            os.chmod(tmp, member.mode & 0o7777)
            os.rename(tmp, path)
            written.append(member.name)
    return {"written": written, "backups": backups}


def op_delete(args: DeleteArgs) -> DeleteReply:
    ctx = Context()
    dest = guard_delete_root(args["dest"], ctx)
    doomed = [(rel, guard_path(os.path.join(dest, rel), "delete", dest=dest, ctx=ctx))
              for rel in args["files"]]  # every path judged before the first unlink
    removed = []
    for rel, real in doomed:
        try:
            if os.path.isdir(real) and not os.path.islink(real):
                continue  # deploy_code deletes files only
            os.unlink(real)
            removed.append(rel)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return {"removed": removed}


def op_read(args: ReadArgs) -> ReadReply:
    out: dict[str, str | None] = {}
    for path in args["paths"]:
        try:
            with open(path, "rb") as fh:
                data = fh.read(int(args.get("limit", 262144)) + 1)
        except OSError:
            out[path] = None
            continue
        out[path] = None if len(data) > int(args.get("limit", 262144)) or b"\0" in data \
            else data.decode("utf-8", "replace")
    return {"contents": out}


