# opsrunner-agent part: guards. Every op that deletes or overwrites judges its paths here,
# and kill_old/verify judge a pidfile's pid here (Python >= 3.8, stdlib only).
#
# For modules: `guard_path(path, purpose, dest=None)` returns the real path to act on or
# raises Refused (its `rule` names the rule that fired). purpose is "delete" or "write" (a
# trailing-/ symlink is refused only for delete); `dest` confines the result to a resolved
# directory. Then: `guard_delete_root(dest)` for a directory deleted under, `tree_usage` and
# `remove` to size and delete what was judged. Build one `Context()` per op and pass it.
import os

SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/proc", "/run", "/sbin", "/sys", "/usr", "/var")
SYSTEM_ITSELF = ("/root",)  # refused itself; below it the home and credential rules apply
SYSTEM_OPEN = ("/var/tmp/", "/var/cache/")  # below these (not these themselves) is allowed
CREDENTIAL_DIRS = (".ssh", ".gnupg", ".aws", ".kube", ".config")
NO_LOGIN_SHELLS = ("nologin", "false", "sync", "shutdown", "halt")


class Refused(Exception):
    """A path or pid the agent will not act on; `rule` is the rule that fired."""

    def __init__(self, rule, message):
        Exception.__init__(self, "rule %s: %s" % (rule, message))
        self.rule = rule


def _below(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def has_glob(text):
    return "*" in text or "?" in text or "[" in text


def squeeze_slashes(path):
    while "//" in path:
        path = path.replace("//", "/")
    return path


def _only_wildcards(part):
    """A bare wildcard: nothing but *, ?, . and [...] classes (`*`, `.*`, `?*`, `[a-z]*`)."""
    import re  # only for glob patterns: re costs ~5 ms to load in every worker that needs it
    return not re.sub(r"\[[^]]*\]|[*?.]", "", part)


def _unescape_octal(raw):
    """mountinfo's escapes (\\040 for a space) decoded, without re."""
    if b"\\" not in raw:
        return raw
    out, i = bytearray(), 0
    while i < len(raw):
        code = raw[i + 1:i + 4]
        if raw[i:i + 1] == b"\\" and len(code) == 3 and all(48 <= c <= 55 for c in code):
            out.append(int(code, 8))
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return bytes(out)


def mount_points(mountinfo="/proc/self/mountinfo"):
    """Every mount point of this mount namespace (octal escapes such as \\040 decoded)."""
    found = set()
    try:
        with open(mountinfo, "rb") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4:
                    raw = _unescape_octal(fields[4])
                    found.add(os.path.normpath(raw.decode("utf-8", "surrogateescape")))
    except OSError:
        pass
    return found


def home_dirs():
    """(homes guarded with their parents, homes whose credential directories are guarded)."""
    import pwd
    mine = set()
    if os.environ.get("HOME", "").startswith("/"):
        mine.add(os.environ["HOME"])
    try:
        mine.add(pwd.getpwuid(os.geteuid()).pw_dir)
    except KeyError:
        pass
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


def _both(homes):
    """Each home as written and as resolved (a home may sit behind a symlink)."""
    return set(os.path.normpath(h) for h in homes) | set(os.path.realpath(h) for h in homes)


class Context(object):
    """What the rules compare against, read once per op."""

    def __init__(self, mounts=None, homes=None, every_home=None):
        self.mounts = mount_points() if mounts is None else set(mounts)
        if homes is None:
            homes, every_home = home_dirs()
        self.homes = sorted(homes)
        self.credentials = sorted(set(os.path.join(h, name) for h in set(every_home or homes)
                                      for name in CREDENTIAL_DIRS))


def _system_rule(real):
    for top in SYSTEM_ITSELF:
        if real == top:
            return "system", "is the system directory %s" % top
    for top in SYSTEM_TREES:
        if _below(real, top) and not any(real.startswith(o) and real != o for o in SYSTEM_OPEN):
            return "system", "is inside the system tree %s" % top
    first = real.split("/")[1]
    if first.startswith("lib"):
        return "system", "is inside the system tree /%s" % first
    return None


def judge(real, ctx):
    """(rule, why) for the first rule a resolved absolute path breaks, or None."""
    if real == "/":
        return "root", "is the filesystem root"
    for home in ctx.homes:
        if real == home:
            return "home", "is the home directory %s" % home
        if _below(home, real):
            return "home", "is %s, a parent of the home directory %s" % (real, home)
    for cred in ctx.credentials:
        if _below(real, cred):
            return "credentials", "is inside the credential directory %s" % cred
    found = _system_rule(real)
    if found:
        return found
    if real.count("/") == 1:
        return "top-level", "is the top-level directory %s" % real
    if real in ctx.mounts:
        return "mount-point", "is the mount point %s" % real
    inside = sorted(m for m in ctx.mounts if m.startswith(real + "/"))
    if inside:
        return "mount-point", "contains the mount point %s" % inside[0]
    return None


def resolve(path):
    """The real location of what `path` names: parents resolved, the last component a link
    itself unless the path ends with / (or . or ..), which names the directory pointed to."""
    path = squeeze_slashes(path)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if path.endswith("/") or last in (".", ".."):
        return os.path.realpath(path)
    parent, name = os.path.split(path)
    return os.path.join(os.path.realpath(parent or "/"), name)


def guard_path(path, purpose="delete", dest=None, ctx=None):
    """The resolved real path to `purpose` (delete, write), or raise Refused."""
    shown = repr(path)
    if not isinstance(path, str) or not path.strip():
        raise Refused("empty", "%s: empty path, refusing to %s" % (shown, purpose))
    expanded = os.path.expandvars(os.path.expanduser(path))
    if not expanded.startswith("/"):
        raise Refused("relative", "%s is not an absolute path, refusing to %s it" % (shown, purpose))
    real = resolve(expanded)
    if real != path:
        shown += " (resolves to %s)" % real
    found = judge(real, ctx or Context())
    if found is None and purpose == "delete" and expanded.endswith("/") \
            and os.path.islink(expanded.rstrip("/")):
        found = ("symlink", "names the directory a symlink points to; a symlink is removed as a "
                 "link, never followed (write it without the trailing / to remove the link)")
    if found is None and dest is not None and not real.startswith(dest.rstrip("/") + "/"):
        found = ("outside-dest", "is outside dest %s" % dest)
    if found:
        raise Refused(found[0], "%s %s, refusing to %s it" % (shown, found[1], purpose))
    return real


def guard_glob(pattern, purpose="delete", ctx=None):
    """Refuse a bare wildcard (`*`, `.*`, `?*`) listing a directory that may not be deleted."""
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
                raise Refused("wildcard", "%r: %r would match everything in %s, which %s; refusing "
                              "to %s it" % (pattern, part, parent, found[1], purpose))


def tree_usage(real):
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
                raise Refused("mount-point", "%s contains the mount point %s, refusing to delete it"
                              % (real, os.path.join(root, name)))
            if not stat.S_ISDIR(st.st_mode):
                total += st.st_size
                files += 1
    return total, files


def remove(real):
    """Remove what guard_path returned: a link or file is unlinked (a link is never followed);
    a directory goes with the fd-based rmtree, which never follows a symlink inside it."""
    import shutil
    import stat
    if stat.S_ISDIR(os.lstat(real).st_mode):
        shutil.rmtree(real)
    else:
        os.unlink(real)


def guard_delete_root(dest, ctx=None):
    """A directory under which files will be deleted: judged, and never a symlink."""
    real = guard_path(dest, "delete", ctx=ctx)
    if os.path.islink(real):
        raise Refused("symlink", "dest %r is a symlink to %s; files are never deleted through a "
                      "symlink (give the real path as dest)" % (dest, os.path.realpath(real)))
    return real


# -- pidfile trust --------------------------------------------------------------------------


