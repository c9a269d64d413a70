# opsrunner-agent part: releases (deploy_code releases: true). Each deploy lands in its own
# directory <dest>/releases/<UTC time>[-<commit>] (its manifest beside it: <name>.json), made
# complete under a temporary name and renamed into place; files the previous release has
# with the same content and mode are hard links to it. <dest>/current is a symlink switched
# atomically (a new link under a temporary name renamed over it), so a job launched through
# it names one whole release, never a mix. Old releases are pruned past `keep`, never the
# current one, the running job's, the last good run's, the newest that passed verify before
# current (a rollback's 'previous') or one a live process uses. A release's
# verdict (goodrun.py: whether a run of it last passed verify or failed) lies beside it.
from __future__ import annotations

import errno
import os
import sys
import time

from .atomic import write_atomic
from .files import CURRENT, RELEASES, file_digest, linked_release
from .goodrun import read_good, release_verdict, verdict_path
from .guards import Context, Refused, guard_path, remove
from .inuse import release_users
from .jobfiles import launch_record, read_pidfile
from .procs import alive
from .reads import Unreadable, load_json
from .wire import json_dumps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, Dict, Mapping

    from .inuse import Scan
    from .protocol_files import ReleaseArgs, ReleaseInfo, ReleaseReply, ReleasesArgs, ReleasesReply
    from .protocol_jobs import LaunchArgs, LaunchRecord

    #: {release name: why it is kept}
    Spared = Dict[str, str]

TEMP_MARK = ".opsrunner-tmp-"
DEFAULT_KEEP = 5
#: The most of a release manifest that is read: it records every file's sha256 (some 100
#: bytes a file), so 64 MiB holds the manifest of over half a million files.
MANIFEST_LIMIT = 64 << 20
#: time.strftime format of the time stamp a release's name starts with (UTC).
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def releases_dir(dest: str) -> str:
    return os.path.join(dest, RELEASES)


def current_link(dest: str) -> str:
    return os.path.join(dest, CURRENT)


def manifest_path(folder: str, name: str) -> str:
    return os.path.join(folder, name + ".json")


def read_manifest(folder: str, name: str) -> dict[str, object] | None:
    """Release `name`'s manifest, or None when it has none; Unreadable, naming it and saying
    why, when it is there but cannot be used (too large, corrupt, not a regular file)."""
    return load_json(manifest_path(folder, name), "release manifest", MANIFEST_LIMIT)


def stamp_of(name: str) -> float | None:
    """The UTC time a release's name starts with (20261201T030000Z[.2][-commit]), or None."""
    stamp = name.partition("-")[0].partition(".")[0]
    if len(stamp) != 16 or not stamp.endswith("Z"):
        return None
    import calendar  # here, not at the top: it and strptime load re and enum, which the agent avoids
    try:
        return float(calendar.timegm(time.strptime(stamp, STAMP_FORMAT)))
    except ValueError:
        return None


def commit_of(name: str) -> str | None:
    """The git commit a release's name ends with (<stamp>-<commit>), or None."""
    return name.partition("-")[2] or None


def release_info(folder: str, name: str) -> ReleaseInfo:
    """A release's commit and time from its manifest; from its name where the manifest is
    absent or cannot be used (so that the releases' order never depends on a manifest's read),
    with why it cannot be used as manifest_problem."""
    try:
        raw = read_manifest(folder, name)
    except Unreadable as exc:  # changed_in_place refuses a rollback over it; the name tells commit and time
        return {"name": name, "commit": commit_of(name), "created": stamp_of(name), "manifest_problem": str(exc)}
    if raw is None:
        return {"name": name, "commit": commit_of(name), "created": stamp_of(name)}
    commit, created = raw.get("commit"), raw.get("created")
    return {"name": name, "commit": commit if isinstance(commit, str) else None,
            "created": float(created) if isinstance(created, (int, float)) else stamp_of(name)}


def release_of(path: str, dest_real: str) -> str | None:
    """The release name a real path lies in (<dest>/releases/<name>/...), or None."""
    top = os.path.join(dest_real, RELEASES) + "/"
    if not path.startswith(top):
        return None
    name = path[len(top):].split("/", 1)[0]
    return name if name and not name.startswith(".") else None


def list_releases(dest: str) -> list[ReleaseInfo]:
    """The releases under dest, oldest first (by the manifest's time, else the name's, then by
    name)."""
    folder = releases_dir(dest)
    try:
        names = [n for n in os.listdir(folder) if not n.startswith(".") and os.path.isdir(os.path.join(folder, n))
                 and not os.path.islink(os.path.join(folder, n))]
    except OSError:
        return []
    found = [release_info(folder, name) for name in names]
    return sorted(found, key=lambda r: (r["created"] or 0.0, r["name"]))


def current_release(dest: str) -> str | None:
    """The release <dest>/current points to, None when there is no such link."""
    return linked_release(dest)


def unique_name(folder: str, name: str) -> str:
    """name, or with .2, .3 ... after its time stamp when a release of that name exists (two
    deploys within one second)."""
    stamp, sep, rest = name.partition("-")
    candidate, n = name, 1
    while any(os.path.lexists(path) for path in (os.path.join(folder, candidate), manifest_path(folder, candidate),
                                                 verdict_path(os.path.join(folder, candidate)))):
        n += 1
        candidate = f"{stamp}.{n}{sep}{rest}"
    return candidate


def prune_plan(names: list[str], keep: int, protected: Mapping[str, str]) -> tuple[list[str], Spared]:
    """(the releases to delete, those past `keep` that stay and why): names are oldest first;
    the newest `keep` stay, and of the older ones every protected release stays."""
    keep = max(1, keep)
    older = names[:-keep] if len(names) > keep else []
    doomed = [n for n in older if n not in protected]
    spared = dict((n, protected[n]) for n in older if n in protected)
    return doomed, spared


def used_by_processes(dest: str, names: Collection[str] | None = None, skip: Collection[int] = ()) -> Scan:
    """Which releases (of `names`, default all of dest's) live processes use (inuse.py: their
    working directory, program, command line, environment, mapped or open files, as each
    process sees its paths), so that none is deleted, or its `current` removed, under a job
    that still runs from it: also a job of another pidfile. `skip`: a job's own processes."""
    if names is None:
        names = [r["name"] for r in list_releases(dest)]
    return release_users(releases_dir(os.path.realpath(dest)), names, skip)


def job_releases(pidfile: str | None, dest_real: str) -> Spared:
    """The release the pidfile's live job was launched from, and the last good run's."""
    kept: Spared = {}
    if not pidfile:
        return kept
    pid, start = read_pidfile(pidfile)
    meta = launch_record(pidfile) or {}
    running = meta.get("release")
    if pid and alive(pid, start) and running:
        kept[running] = "the running job's"
    good = read_good(pidfile) or {}
    good_name = good.get("release")
    if good_name and (good.get("release_dir") or "").startswith(os.path.join(dest_real, RELEASES) + "/"):
        kept.setdefault(good_name, "the last good run's")
    return kept


def op_releases(args: ReleasesArgs) -> ReleasesReply:
    dest = args["dest"]
    reply: ReleasesReply = {"releases": list_releases(dest), "current": current_release(dest)}
    pidfile = args.get("pidfile")
    if pidfile:
        pid, start = read_pidfile(pidfile)
        meta = launch_record(pidfile) or {}
        reply["running"] = meta.get("release") if pid and alive(pid, start) else None
        reply["good"] = (read_good(pidfile) or {}).get("release")
    return reply


def switch_link(link: str, target: str) -> None:
    """Point `link` at `target` atomically: a new symlink under a temporary name, renamed over
    the old one (rename(2) replaces it in one step: a reader sees the old release or the new)."""
    if os.path.isdir(link) and not os.path.islink(link):
        raise Refused("not-a-link", f"{link} is a directory, not a symlink: move it away to use releases")
    parent = os.path.dirname(link)
    relative = os.path.relpath(target, parent)  # the tree keeps working when moved or bind-mounted
    while True:
        tmp = f"{link}{TEMP_MARK}{os.urandom(6).hex()}"
        try:
            os.symlink(relative, tmp)
            break
        except FileExistsError:
            continue
    try:
        os.rename(tmp, link)
    except OSError:
        os.unlink(tmp)
        raise


def _link_or_copy(src: str, dst: str) -> bool:
    """Hard-link an unchanged file from the previous release; copy where links are refused
    (another file system, fs.protected_hardlinks). True when linked."""
    try:
        os.link(src, dst)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES):
            raise
    import shutil
    shutil.copy2(src, dst)
    return False


def _write_sent(tmp: str, ctx: Context) -> dict[str, str]:
    """The payload's files written under tmp: {relative path: sha256 of what was written}."""
    import hashlib
    import tarfile
    sent: dict[str, str] = {}
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                continue
            path = guard_path(os.path.join(tmp, member.name), "write", dest=tmp, ctx=ctx)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            digest = hashlib.sha256()
            with open(path, "xb") as fh:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    digest.update(chunk)
                    fh.write(chunk)
            os.chmod(path, member.mode & 0o7777)
            sent[member.name] = digest.hexdigest()
    return sent


def _link_unchanged(tmp: str, rel: str, old: str, mode: int, expected: str | None,
                    ctx: Context) -> tuple[str, bool] | None:
    """Link (or copy) the base release's file when its mode and content are still the ones
    expected; the digest is taken of the new link itself, so what is checked is what the
    release holds. (its sha256, whether it is a hard link), or None (nothing left at
    tmp/rel) when it differs."""
    try:
        st = os.lstat(old)
    except FileNotFoundError:
        return None
    if (st.st_mode & 0o7777) != mode or not os.path.isfile(old) or os.path.islink(old):
        return None
    path = guard_path(os.path.join(tmp, rel), "write", dest=tmp, ctx=ctx)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    hard = _link_or_copy(old, path)
    digest = file_digest(path, "sha256")
    if digest != expected:
        os.unlink(path)
        return None
    return digest, hard


def _fill(tmp: str, args: ReleaseArgs, base_dir: str | None,
          ctx: Context) -> tuple[int, int, dict[str, str], list[str]]:
    """The payload's files written, the others linked from the base release where their
    content is still the expected one: (written, hard-linked, {path: sha256} of the
    release, stale files)."""
    digests = _write_sent(tmp, ctx)
    written, hard_links = len(digests), 0
    expected = args.get("sha256") or {}
    stale: list[str] = []
    for rel, mode in sorted(args["files"].items()):
        if rel in digests:
            continue
        if base_dir is None:
            raise ValueError(f"{rel} was not sent and there is no previous release to link it from")
        linked = _link_unchanged(tmp, rel, os.path.join(base_dir, rel), mode, expected.get(rel), ctx)
        if linked is None:
            stale.append(rel)
        else:
            digests[rel], hard = linked
            hard_links += hard
    return written, hard_links, digests, stale


def op_release(args: ReleaseArgs) -> ReleaseReply:
    """Make a release from the payload (the changed files) and the base release (the rest),
    switch current to it, and prune. Files of the base release that no longer have the
    expected content (edited since the controller's stat) are never linked: the op fails
    naming them, and makes nothing."""
    ctx = Context()
    dest = guard_path(args["dest"], "write", ctx=ctx)
    folder = releases_dir(dest)
    os.makedirs(folder, exist_ok=True)
    name = unique_name(folder, args["name"])
    base = args.get("base")
    base_dir = os.path.join(folder, base) if base else None
    tmp = os.path.join(folder, f".{name}{TEMP_MARK}{os.urandom(6).hex()}")
    os.mkdir(tmp, 0o755)
    try:
        written, linked, digests, stale = _fill(tmp, args, base_dir, ctx)
    except BaseException:
        remove(tmp)
        raise
    if stale:
        remove(tmp)
        return {"error": f"{len(stale)} file(s) of release {base} changed since they were compared, not linked: "
                         + ", ".join(stale[:10]) + (" ..." if len(stale) > 10 else ""), "stale": stale}
    manifest = {"name": name, "commit": args.get("commit"), "dirty": bool(args.get("dirty")),
                "created": time.time(), "source": args.get("source"), "files": len(args["files"]), "base": base,
                "sha256": digests}
    write_atomic(manifest_path(folder, name), json_dumps(manifest).encode())
    final = os.path.join(folder, name)
    os.rename(tmp, final)
    previous = current_release(dest)
    switch_link(current_link(dest), final)
    limits: list[str] = []
    pruned, spared = prune(dest, int(args.get("keep") or DEFAULT_KEEP), args.get("pidfile"), ctx, limits)
    reply: ReleaseReply = {"release": name, "release_dir": final, "written": written, "linked": linked,
                           "previous": previous, "pruned": pruned, "spared": spared}
    if limits:
        reply["scan_limits"] = limits[0]
    return reply


def changed_in_place(release_dir: str) -> str | None:
    """The first file of a release whose content is no longer the one its manifest recorded
    (edited in place: through a hard link, every release sharing it changed too), as a
    sentence; None when all match or the manifest records no digests (an older release).
    ValueError when the manifest is there but cannot be used (too large, corrupt): a check
    that cannot be made is never taken for one that passed."""
    folder, name = os.path.split(release_dir.rstrip("/"))
    try:
        raw = read_manifest(folder, name) or {}
    except Unreadable as exc:
        raise ValueError(f"cannot check the files of release {name}: its {exc}; refusing to roll back to a "
                         "release whose integrity cannot be checked") from None
    recorded = raw.get("sha256")
    if not isinstance(recorded, dict):
        return None
    for rel, digest in sorted(recorded.items()):
        path = os.path.join(release_dir, str(rel))
        try:
            actual = file_digest(path, "sha256")
        except OSError as exc:
            return f"{path} is unreadable or missing ({exc.strerror})"
        if actual != digest:
            return f"{path} was changed in place since release {name} was deployed"
    return None


def passed_before(dest: str, names: list[str], current: str) -> str | None:
    """The newest release before `current` (names oldest first) whose last verdict is passed:
    where rollback.yml goes by default, kept however many failed releases came after it."""
    if current not in names:
        return None
    folder = releases_dir(dest)
    for name in reversed(names[:names.index(current)]):
        try:
            verdict = release_verdict(os.path.join(folder, name))
        except Unreadable:
            continue  # never chosen as 'previous' (rollback.py): nothing to keep it for
        if verdict is not None and verdict["state"] == "passed":
            return name
    return None


def prune(dest: str, keep: int, pidfile: str | None, ctx: Context,
          limits: list[str] | None = None) -> tuple[list[str], Spared]:
    """Delete the releases past `keep`, sparing those a job needs (prune_plan's rules). When
    the job's last good run cannot be read, which release it needs is unknown: none is deleted.
    (deleted, spared and why); `limits` gets what the scan of /proc could not see of the
    processes that might have used those deleted, where it could not see all."""
    dest_real = os.path.realpath(dest)
    names = [r["name"] for r in list_releases(dest)]
    protected: Spared = {}
    current = current_release(dest)
    if current:
        protected[current] = "current"
    try:
        needed = job_releases(pidfile, dest_real)
    except Unreadable as exc:
        needed = dict((name, f"kept: {exc}") for name in names)
    fallback = passed_before(dest, names, current) if current else None
    if fallback:
        needed.setdefault(fallback, "the newest that passed verify before current (a rollback's 'previous')")
    for name, why in needed.items():
        protected.setdefault(name, why)
    doomed = prune_plan(names, keep, protected)[0]  # only these need the scan of /proc
    scan = used_by_processes(dest, doomed) if doomed else None
    for name in doomed if scan else ():
        who = scan.users.get(name) if scan else None
        reason = scan.kept(name) if scan else None  # in use, or which processes do cannot be told
        if reason:
            protected[name] = f"in use by {who}" if who else f"kept: {reason}"
    doomed, spared = prune_plan(names, keep, protected)
    folder = releases_dir(dest)
    for name in doomed:
        remove(guard_path(os.path.join(folder, name), "delete", dest=folder, ctx=ctx))
        for path in (manifest_path(folder, name), verdict_path(os.path.join(folder, name))):
            if os.path.lexists(path):
                os.unlink(path)
    if limits is not None and scan and doomed and scan.limits():
        limits.append(scan.limits())
    return doomed, spared


def _swap(value: str, link: str, real: str) -> str:
    """value with the link's path replaced by the release's (as an argument, after `=`, or
    inside a shell command line)."""
    if value == link:
        return real
    if value.endswith("=" + link):
        return value[:-len(link)] + real
    return value.replace(link + "/", real + "/")


def _within(word: str, folder: str) -> bool:
    """Whether a word of a command line (or a path list such as PYTHONPATH) names `folder` or
    a path in it."""
    return any(part == folder or part.startswith(folder + "/") for piece in word.split(":")
               for part in [piece.partition("=")[2] if "=" in piece else piece])


def resolve_release_link(args: LaunchArgs) -> tuple[LaunchRecord, str | None]:
    """A launch through a release's `current` link: argv, env and chdir are rewritten to the
    release it points to now, so the job and its record name the real release (and a later
    switch of `current` changes nothing under it). (the record's release keys, a problem)."""
    link = args.get("release_link")
    if not link:
        return {}, None
    link = os.path.abspath(link).rstrip("/")
    if not os.path.islink(link):
        if args.get("check_mode"):
            return {}, None  # a dry run's deploy_code would have made it
        what = "a directory" if os.path.isdir(link) else "missing"
        return {}, f"release link {link} is {what}, not a symlink (deploy_code with releases: true makes it)"
    real = os.path.realpath(link)
    if not os.path.isdir(real):
        return {}, f"release link {link} points to {real}, which is not a directory"
    args["argv"] = [_swap(arg, link, real) for arg in args["argv"]]
    if args.get("env"):  # PYTHONPATH=<dest>/current/src and the like (rewritten here: env stays on the target)
        args["env"] = dict((key, _swap(value, link, real)) for key, value in args["env"].items())
    if args.get("chdir"):
        args["chdir"] = _swap(os.path.abspath(args["chdir"]), link, real)
    named = [*args["argv"], args.get("chdir") or "", *(args.get("env") or {}).values()]
    if not any(_within(word, real) for word in named):
        # The job would not run from the release, yet be recorded (and verified) as it. (A
        # rollback's relaunch names the real release already: its record was resolved.)
        return {}, (f"release_link {link} is set, but neither the command, its chdir nor its env goes "
                    f"through it: the job would not run the release it points to; point the command "
                    f"(train_command) or its directory (train_chdir) at {link}")
    info = release_info(os.path.dirname(real), os.path.basename(real))
    return {"release": info["name"], "release_dir": real, "commit": info["commit"]}, None


def release_dir_of(dest: str, name: str) -> tuple[str, str | None]:
    """(the directory of release `name` under dest, its commit); ValueError when there is none."""
    folder = releases_dir(dest)
    path = os.path.join(folder, name)
    if "/" in name or name.startswith(".") or not os.path.isdir(path):
        known = ", ".join(r["name"] for r in list_releases(dest)) or "none"
        raise ValueError(f"no release {name!r} in {folder} (releases: {known})")
    return path, release_info(folder, name)["commit"]
