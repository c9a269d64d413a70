# opsrunner-agent part 4: clear_cache and deploy_code on the target.
# Heavier modules (glob, hashlib, shutil, tarfile) are imported where used: most calls need none.
import errno
import os
import stat
import sys
import time


def _refusal(path, home, pattern):
    real = os.path.normpath(path)
    if not pattern.strip():
        return "empty path"
    if ".." in pattern.split("/"):
        return "path contains '..'"
    if not os.path.isabs(real):
        return "not an absolute path"
    if real == "/":
        return "the filesystem root"
    if home and (real == home or home.startswith(real.rstrip("/") + "/")):
        return "the home directory or one of its parents"
    if real.count("/") < 2:
        return "a top-level directory"
    return None


def _usage(path):
    total, files = 0, 0
    try:
        st = os.lstat(path)
    except OSError:
        return 0, 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size, 1
    for root, dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def op_clear(args):
    if not os.environ.get("USER"):
        import pwd
        os.environ["USER"] = pwd.getpwuid(os.getuid()).pw_name
    home = os.path.expanduser("~")
    limit = int(args.get("max_matches", 20))
    targets, refused = [], []
    for pattern in args["paths"]:
        expanded = os.path.expandvars(os.path.expanduser(pattern)) if pattern.strip() else pattern
        reason = _refusal(expanded, home, pattern)
        if reason:
            refused.append("%r: %s" % (pattern, reason))
            continue
        import glob
        matches = sorted(glob.glob(expanded))
        if len(matches) > limit:
            refused.append("%r matches %d entries (more than max_matches=%d)" % (pattern, len(matches), limit))
            continue
        for match in matches:
            reason = _refusal(match, home, match)
            if reason:
                refused.append("%r matched %s: %s" % (pattern, match, reason))
            elif match not in targets:
                targets.append(match)
    if refused:
        return {"error": "refusing to clear: " + "; ".join(refused) + " (nothing was removed)"}
    removed = []
    for path in targets:
        size, files = _usage(path)
        removed.append({"path": path, "bytes": size, "files": files})
        if not args.get("check_mode"):
            if os.path.isdir(path) and not os.path.islink(path):
                import shutil
                shutil.rmtree(path)
            else:
                os.unlink(path)
    return {"changed": bool(removed), "removed": removed, "bytes": sum(r["bytes"] for r in removed)}


# -- deploy_code -----------------------------------------------------------------------------
def _sha256(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _excluded(rel, patterns):
    import fnmatch
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def op_stat(args):
    """Checksums and modes of the files the controller wants to deploy, and extras under dest."""
    dest = args["dest"]
    files = {}
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
        files[rel] = {"sha256": _sha256(path), "mode": stat.S_IMODE(st.st_mode), "size": st.st_size}
    extra = []
    if args.get("list_extra") and os.path.isdir(dest):
        wanted = set(args["files"])
        for root, dirs, names in os.walk(dest):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), dest)
                if rel not in wanted and not _excluded(rel, args.get("exclude") or []):
                    extra.append(rel)
    return {"files": files, "extra": sorted(extra)}


def op_write(args):
    """Unpack a tar stream from stdin; each file lands atomically (temp file + rename)."""
    dest = args["dest"]
    written, backups = [], []
    stamp = time.strftime("%Y%m%d%H%M%S")
    import shutil
    import tarfile
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                continue
            path = os.path.join(dest, member.name) if member.name != "." else dest
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            if args.get("backup") and os.path.isfile(path):
                shutil.copy2(path, "%s.%s~" % (path, stamp))
                backups.append("%s.%s~" % (path, stamp))
            tmp = "%s.opsrunner-tmp-%d" % (path, os.getpid())
            src = tar.extractfile(member)
            with open(tmp, "wb") as fh:
                shutil.copyfileobj(src, fh, 1 << 20)
            os.chmod(tmp, member.mode & 0o7777)
            os.rename(tmp, path)
            written.append(member.name)
    return {"written": written, "backups": backups}


def op_delete(args):
    dest = args["dest"]
    removed = []
    for rel in args["files"]:
        if rel.startswith("/") or ".." in rel.split("/"):
            continue
        try:
            os.unlink(os.path.join(dest, rel))
            removed.append(rel)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return {"removed": removed}


def op_read(args):
    out = {}
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


