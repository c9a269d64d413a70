# opsrunner-agent part: guards. Every op that deletes or overwrites judges its paths here,
# and kill_old/verify judge a pidfile's pid here (Python >= 3.8, stdlib only).
#
# For modules: `guard_path(path, purpose, dest=None)` returns the real path to act on or
# raises Refused (its `rule` names the rule that fired). purpose is "delete" or "write" (a
# trailing-/ symlink is refused only for delete); `dest` confines the result to a resolved
# directory. Then: `guard_delete_root(dest)` for a directory deleted under, `tree_usage` and
# `remove` to size and delete what was judged. Build one `Context()` per op and pass it.
# A glob (clear_cache) is judged with `guard_glob` and each of its matches with `guard_glob_match`.
from __future__ import annotations

import os

from .mounts import unescape_octal
from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Optional, Tuple

    #: (the rule that fired, why), as judge() finds it.
    Finding = Optional[Tuple[str, str]]

SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/proc", "/run", "/sbin", "/sys", "/usr", "/var")
SYSTEM_ITSELF = ("/root",)  # refused itself; below it the home and credential rules apply
SYSTEM_OPEN = ("/var/tmp/", "/var/cache/")  # below these (not these themselves) is allowed
CREDENTIAL_DIRS = (".ssh", ".gnupg", ".aws", ".kube", ".config")
NO_LOGIN_SHELLS = ("nologin", "false", "sync", "shutdown", "halt")
NEVER_FOLLOWED = "a symlink is removed as a link, never followed"


class Refused(Exception):
    """A path or pid the agent will not act on; `rule` is the rule that fired."""

    def __init__(self, rule: str, message: str) -> None:
        Exception.__init__(self, f"rule {rule}: {message}")
        self.rule = rule


def _below(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def has_glob(text: str) -> bool:
    return "*" in text or "?" in text or "[" in text


def squeeze_slashes(path: str) -> str:
    while "//" in path:
        path = path.replace("//", "/")
    return path


def _only_wildcards(part: str) -> bool:
    """A bare wildcard: nothing but *, ?, . and [...] classes (`*`, `.*`, `?*`, `[a-z]*`)."""
    import re  # only for glob patterns: re costs ~5 ms to load in every worker that needs it
    return not re.sub(r"\[[^]]*\]|[*?.]", "", part)


def mount_points(mountinfo: str = "/proc/self/mountinfo") -> set[str]:
    """Every mount point of this mount namespace (octal escapes such as \\040 decoded)."""
    found: set[str] = set()
    try:
        with open(mountinfo, "rb") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4:
                    raw = unescape_octal(fields[4])
                    found.add(os.path.normpath(raw.decode("utf-8", "surrogateescape")))
    except OSError:
        pass
    return found


def home_dirs() -> tuple[set[str], set[str]]:
    """(homes guarded with their parents, homes whose credential directories are guarded)."""
    import pwd
    mine: set[str] = set()
    if os.environ.get("HOME", "").startswith("/"):
        mine.add(os.environ["HOME"])
    with ignored(KeyError):
        mine.add(pwd.getpwuid(os.geteuid()).pw_dir)
    every = set(mine)
    try:
        for entry in pwd.getpwall():
            if entry.pw_dir.startswith("/"):
                every.add(entry.pw_dir)
                if entry.pw_uid == 0 or not entry.pw_shell.endswith(NO_LOGIN_SHELLS):
                    mine.add(entry.pw_dir)  # a login account's home is someone's home
    except OSError:
        pass
    return _both(mine), _both(every)


def _both(homes: Iterable[str]) -> set[str]:
    """Each home as written and as resolved (a home may sit behind a symlink)."""
    return set(os.path.normpath(h) for h in homes) | set(os.path.realpath(h) for h in homes)


class Context:
    """What the rules compare against, read once per op."""

    def __init__(self, mounts: Iterable[str] | None = None, homes: Iterable[str] | None = None,
                 every_home: Iterable[str] | None = None) -> None:
        self.mounts = mount_points() if mounts is None else set(mounts)
        if homes is None:
            homes, every_home = home_dirs()
        self.homes = sorted(homes)
        self.credentials = sorted(set(os.path.join(h, name) for h in set(every_home or self.homes)
                                      for name in CREDENTIAL_DIRS))


def _system_rule(real: str) -> Finding:
    for top in SYSTEM_ITSELF:
        if real == top:
            return "system", f"is the system directory {top}"
    for top in SYSTEM_TREES:
        if _below(real, top) and not any(real.startswith(o) and real != o for o in SYSTEM_OPEN):
            return "system", f"is inside the system tree {top}"
    first = real.split("/")[1]
    if first.startswith("lib"):
        return "system", f"is inside the system tree /{first}"
    return None


def judge(real: str, ctx: Context) -> Finding:
    """(rule, why) for the first rule a resolved absolute path breaks, or None."""
    if real == "/":
        return "root", "is the filesystem root"
    for home in ctx.homes:
        if real == home:
            return "home", f"is the home directory {home}"
        if _below(home, real):
            return "home", f"is {real}, a parent of the home directory {home}"
    for cred in ctx.credentials:
        if _below(real, cred):
            return "credentials", f"is inside the credential directory {cred}"
    found = _system_rule(real)
    if found:
        return found
    if real.count("/") == 1:
        return "top-level", f"is the top-level directory {real}"
    if real in ctx.mounts:
        return "mount-point", f"is the mount point {real}"
    inside = sorted(m for m in ctx.mounts if m.startswith(real + "/"))
    if inside:
        return "mount-point", f"contains the mount point {inside[0]}"
    return None


def resolve(path: str) -> str:
    """The real location of what `path` names: parents resolved, the last component a link
    itself unless the path ends with / (or . or ..), which names the directory pointed to."""
    path = squeeze_slashes(path)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if path.endswith("/") or last in (".", ".."):
        return os.path.realpath(path)
    parent, name = os.path.split(path)
    return os.path.join(os.path.realpath(parent or "/"), name)


def guard_path(path: str, purpose: str = "delete", dest: str | None = None, ctx: Context | None = None) -> str:
    """The resolved real path to `purpose` (delete, write), or raise Refused."""
    shown = repr(path)
    if not isinstance(path, str) or not path.strip():
        raise Refused("empty", f"{shown}: empty path, refusing to {purpose}")
    expanded = os.path.expandvars(os.path.expanduser(path))
    if not expanded.startswith("/"):
        raise Refused("relative", f"{shown} is not an absolute path, refusing to {purpose} it")
    real = resolve(expanded)
    if real != path:
        shown += f" (resolves to {real})"
    found = judge(real, ctx or Context())
    if found is None and purpose == "delete" and expanded.endswith("/") \
            and os.path.islink(expanded.rstrip("/")):
        found = ("symlink", f"names the directory a symlink points to; {NEVER_FOLLOWED} (write it without the "
                 "trailing / to remove the link)")
    if found is None and dest is not None and not real.startswith(dest.rstrip("/") + "/"):
        found = ("outside-dest", f"is outside dest {dest}")
    if found:
        raise Refused(found[0], f"{shown} {found[1]}, refusing to {purpose} it")
    return real


def _first_wildcard(parts: list[str]) -> int:
    """The index of a glob's first component with a wildcard (len(parts) when none has one)."""
    for i, part in enumerate(parts):
        if has_glob(part):
            return i
    return len(parts)


def _glob_link(pattern: str, match: str | None = None) -> str | None:
    """The first symlink a glob follows as a directory: the directory it lists (the part
    before its first wildcard), and on the way to `match`, the directories below that its
    wildcards matched. None when it follows none."""
    parts = pattern.split("/")
    first = _first_wildcard(parts)
    if match is None:
        folders = ["/".join(parts[:first]) or "/"]
    else:
        names = squeeze_slashes(match).split("/")
        folders = ["/".join(names[:i]) or "/" for i in range(first, len(names))]
    for folder in folders:
        if os.path.islink(folder):
            return folder
    return None


def _refuse_glob_link(shown: str, link: str | None, purpose: str) -> None:
    """The trailing-/ rule for a glob: `link/*` lists the directory a symlink points to."""
    if link is not None:
        real = os.path.realpath(link)
        raise Refused("symlink", f"{shown} lists {link}, a symlink to {real}: a glob through it names the "
                      f"directory the link points to; {NEVER_FOLLOWED} (write the real path, {real}, to "
                      f"{purpose} what is in it), refusing to {purpose} it")


def guard_glob(pattern: str, purpose: str = "delete", ctx: Context | None = None) -> None:
    """Refuse a bare wildcard (`*`, `.*`, `?*`) listing a directory that may not be deleted,
    and (delete) a glob that lists a directory through a symlink, as guard_path refuses `link/`."""
    expanded = squeeze_slashes(os.path.expandvars(os.path.expanduser(pattern)))
    parts = expanded.split("/")
    for i, part in enumerate(parts):
        if has_glob(part) and _only_wildcards(part):
            parent = "/".join(parts[:i]) or "/"
            if has_glob(parent):
                continue  # the earlier wildcard was judged; each match is judged later
            real = resolve(parent + "/")
            found = judge(real, ctx or Context())
            if found:
                raise Refused("wildcard", f"{pattern!r}: {part!r} would match everything in {parent}, which "
                              f"{found[1]}; refusing to {purpose} it")
    if purpose == "delete" and expanded.startswith("/"):
        _refuse_glob_link(repr(pattern), _glob_link(expanded), purpose)


def guard_glob_match(pattern: str, match: str, purpose: str = "delete", ctx: Context | None = None) -> str:
    """guard_path for one match of a glob that guard_glob passed; (delete) a match reached
    through a symlinked directory that a wildcard matched (`cache*/*`) is refused as
    guard_glob refuses `link/*`."""
    real = guard_path(match, purpose, ctx=ctx)
    if purpose == "delete":
        expanded = squeeze_slashes(os.path.expandvars(os.path.expanduser(pattern)))
        _refuse_glob_link(f"{pattern!r} (matching {match!r})", _glob_link(expanded, match), purpose)
    return real


def tree_usage(real: str) -> tuple[int, int]:
    """(bytes, files) under a path to delete; Refused if a mount point hides below it."""
    import stat
    try:
        top = os.lstat(real)
    except OSError:
        return 0, 0
    if not stat.S_ISDIR(top.st_mode):
        return top.st_size, 1
    total, files = 0, 0
    for root, dirs, names in os.walk(real):
        for name in names + dirs:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if st.st_dev != top.st_dev:
                raise Refused("mount-point", f"{real} contains the mount point {os.path.join(root, name)}, "
                              "refusing to delete it")
            if not stat.S_ISDIR(st.st_mode):
                total += st.st_size
                files += 1
    return total, files


def remove(real: str) -> None:
    """Remove what guard_path returned: a link or file is unlinked (a link is never followed);
    a directory goes with the fd-based rmtree, which never follows a symlink inside it."""
    import shutil
    import stat
    if stat.S_ISDIR(os.lstat(real).st_mode):
        shutil.rmtree(real)
    else:
        os.unlink(real)


def guard_delete_root(dest: str, ctx: Context | None = None) -> str:
    """A directory under which files will be deleted: judged, and never a symlink."""
    real = guard_path(dest, "delete", ctx=ctx)
    if os.path.islink(real):
        raise Refused("symlink", f"dest {dest!r} is a symlink to {os.path.realpath(real)}; files are never deleted "
                      "through a symlink (give the real path as dest)")
    return real


# -- pidfile trust --------------------------------------------------------------------------


