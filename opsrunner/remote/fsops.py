# opsrunner-agent part: file operations for stat, copy, template, file, lineinfile and wait_for
# (Python >= 3.8, stdlib only; runs on targets). Every op takes a `check` flag and changes
# nothing when it is set; every op that overwrites or deletes asks guards.py's guard_path first,
# with or without `check`: check mode refuses what a real run would.
from __future__ import annotations

import os
import stat as stat_mod
import time

from .files import data_digest, file_digest
from .guards import guard_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_files import (
        FsFileArgs,
        FsFileReply,
        FsPutArgs,
        FsPutReply,
        FsStatArgs,
        FsStatInfo,
        FsStatReply,
        LineInFileArgs,
        LineInFileReply,
        WaitForArgs,
        WaitForReply,
    )


def _guard(path: str, purpose: str) -> str:
    """The target path guard (guards.py part): raises Refused, naming the rule, or returns."""
    return guard_path(path, purpose)  # the guards part, concatenated before this one


def _owner_names(st: os.stat_result) -> tuple[str, str]:
    import grp
    import pwd
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return owner, group


def op_fs_stat(args: FsStatArgs) -> FsStatReply:
    path = args["path"]
    try:
        st = os.stat(path) if args.get("follow") else os.lstat(path)
    except FileNotFoundError:
        return {"stat": {"exists": False}}
    owner, group = _owner_names(st)
    info: FsStatInfo = {"exists": True, "path": path, "mode": f"{stat_mod.S_IMODE(st.st_mode):04o}",
            "isdir": stat_mod.S_ISDIR(st.st_mode), "isreg": stat_mod.S_ISREG(st.st_mode),
            "islnk": stat_mod.S_ISLNK(st.st_mode), "size": st.st_size, "uid": st.st_uid,
            "gid": st.st_gid, "pw_name": owner, "gr_name": group, "mtime": st.st_mtime}
    if info["islnk"]:
        info["lnk_source"] = os.path.realpath(path)
        info["lnk_target"] = os.readlink(path)
    if info["isreg"] and args.get("checksum", True):
        info["checksum"] = file_digest(path, "sha1")
    return {"stat": info}


def _attrs(path: str, mode: str | None, owner: str | None, group: str | None, check: bool) -> bool:
    """Apply mode/owner/group; True when something differed."""
    import grp
    import pwd
    st = os.lstat(path)
    changed = False
    if mode is not None and stat_mod.S_IMODE(st.st_mode) != int(str(mode), 8):
        changed = True
        if not check:
            os.chmod(path, int(str(mode), 8))
    uid = -1 if owner is None else pwd.getpwnam(owner).pw_uid
    gid = -1 if group is None else grp.getgrnam(group).gr_gid
    if (uid != -1 and uid != st.st_uid) or (gid != -1 and gid != st.st_gid):
        changed = True
        if not check:
            os.lchown(path, uid, gid)
    return changed


def _read_text(path: str, limit: int = 1 << 20) -> str | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except (FileNotFoundError, IsADirectoryError):
        return None
    if len(data) > limit or b"\0" in data:
        return "<binary or larger than 1 MiB: not shown>\n"
    return data.decode("utf-8", "replace")


def _write_atomic(dest: str, data: bytes, mode: str | None) -> None:
    import tempfile
    folder = os.path.dirname(dest) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".opsrunner.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, int(str(mode), 8))
        elif os.path.exists(dest):
            os.chmod(tmp, stat_mod.S_IMODE(os.stat(dest).st_mode))
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def op_fs_put(args: FsPutArgs) -> FsPutReply:
    """Write content to dest when it differs (atomically); then mode/owner/group."""
    import base64
    import shutil
    dest, check = args["dest"], bool(args.get("check"))
    data = base64.b64decode(args["content_b64"])
    if os.path.isdir(dest):
        raise ValueError(f"dest {dest} is a directory")
    exists = os.path.exists(dest)
    checksum = data_digest(data, "sha1")  # files.py part
    same = exists and file_digest(dest, "sha1") == checksum
    backup = None
    reply: FsPutReply = {"checksum": checksum, "dest": dest, "changed": not same}
    if args.get("diff") and not same:
        reply["before"] = (_read_text(dest) if exists else "") or ""
    if not same:
        _guard(dest, "overwrite")
        if not os.path.isdir(os.path.dirname(dest) or "."):
            raise ValueError(f"the folder of {dest} does not exist")
        if not check:
            if exists and args.get("backup"):
                backup = f"{dest}.{time.strftime('%Y%m%d%H%M%S')}~"
                shutil.copy2(dest, backup)
            _write_atomic(dest, data, args.get("mode"))
    attrs = os.path.exists(dest) and _attrs(dest, args.get("mode"), args.get("owner"), args.get("group"), check)
    reply["changed"] = (not same) or attrs
    if backup:
        reply["backup_file"] = backup
    return reply


def _absent(path: str, check: bool) -> bool:
    import shutil
    if not os.path.lexists(path):
        return False
    _guard(path, "delete")
    if not check:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    return True


def _link(path: str, src: str | None, check: bool) -> bool:
    current = os.readlink(path) if os.path.islink(path) else None
    if current == src:
        return False
    if src is None:
        raise ValueError(f"state link needs src (what {path} points to)")
    if os.path.lexists(path):
        if current is None:
            raise ValueError(f"{path} exists and is not a symlink (refusing to replace it)")
        _guard(path, "replace")
    if not check:
        tmp = f"{path}.opsrunner-link"
        os.symlink(src, tmp)
        os.replace(tmp, path)
    return True


def _present(path: str, state: str, check: bool) -> bool:
    exists = os.path.lexists(path)
    if state == "directory":
        if exists and not os.path.isdir(path):
            raise ValueError(f"{path} exists and is not a directory")
        if not exists and not check:
            os.makedirs(path)
        return not exists
    if state == "touch":  # as ansible-core: touching is a change every time
        if not check:
            with open(path, "ab"):
                pass
            os.utime(path, None)
        return True
    if not exists:
        raise ValueError(f"file {path} does not exist (use state: touch to create it)")
    return False


def op_fs_file(args: FsFileArgs) -> FsFileReply:
    path, state, check = args["path"], args["state"], bool(args.get("check"))
    if state == "absent":
        return {"changed": _absent(path, check), "path": path, "state": state}
    if state == "link":
        return {"changed": _link(path, args.get("src"), check), "path": path, "state": state}
    changed = _present(path, state, check)
    if os.path.lexists(path):
        changed = _attrs(path, args.get("mode"), args.get("owner"), args.get("group"), check) or changed
    return {"changed": changed, "path": path, "state": state}


def _lines_after(lines: list[str], args: LineInFileArgs) -> tuple[list[str], str]:
    """lineinfile's edit of a list of lines: (new lines, message)."""
    import re
    line, state = args.get("line"), args.get("state") or "present"
    regexp_text, before = args.get("regexp"), args.get("insertbefore")
    regexp = re.compile(regexp_text) if regexp_text else None
    matches = [i for i, text in enumerate(lines) if (regexp.search(text) if regexp else text == line)]
    if state == "absent":
        kept = [text for i, text in enumerate(lines) if i not in matches]
        return kept, f"{len(matches)} line(s) removed" if matches else ""
    if line is None:
        raise ValueError("lineinfile: state present needs line")
    if matches:
        index = matches[-1]  # as ansible-core: the last match is replaced
        if lines[index] == line:
            return lines, ""
        new = list(lines)
        new[index] = line
        return new, "line replaced"
    if regexp is not None and any(text == line for text in lines):
        return lines, ""
    where = args.get("insertafter") or "EOF"
    new = list(lines)
    if before:
        pattern = re.compile(before)
        hits = [i for i, text in enumerate(lines) if pattern.search(text)]
        new.insert(hits[-1] if hits else len(new), line)
    elif where not in ("EOF",):
        pattern = re.compile(where)
        hits = [i for i, text in enumerate(lines) if pattern.search(text)]
        new.insert(hits[-1] + 1 if hits else len(new), line)
    else:
        new.append(line)
    return new, "line added"


def op_lineinfile(args: LineInFileArgs) -> LineInFileReply:
    import shutil
    path, check = args["path"], args.get("check")
    if not os.path.exists(path):
        if not args.get("create") or args.get("state") == "absent":
            if args.get("state") == "absent":
                return {"changed": False, "msg": "file not present"}
            raise ValueError(f"Destination {path} does not exist !")
        text = ""
    else:
        found = _read_text(path, limit=16 << 20)
        if found is None:  # a directory, or gone since
            raise ValueError(f"{path} is not a file lineinfile can edit")
        text = found
    lines = text.splitlines()
    new, msg = _lines_after(lines, args)
    if not msg:
        return {"changed": False, "msg": ""}
    after = "\n".join(new) + ("\n" if new else "")
    reply: LineInFileReply = {"changed": True, "msg": msg, "before": text, "after": after}
    _guard(path, "overwrite")  # check mode refuses what the run would
    if not check:
        if os.path.exists(path) and args.get("backup"):
            reply["backup_file"] = f"{path}.{time.strftime('%Y%m%d%H%M%S')}~"
            shutil.copy2(path, reply["backup_file"])
        _write_atomic(path, after.encode("utf-8"), args.get("mode"))
    return reply


def _port_open(host: str, port: int) -> bool:
    import socket
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _wait_condition(args: WaitForArgs) -> bool:
    state = args.get("state") or "started"
    port, path = args.get("port"), args.get("path")
    if port is not None:
        is_open = _port_open(args.get("host") or "127.0.0.1", int(port))
        return is_open if state in ("started", "present") else not is_open
    if path is None:
        raise ValueError("wait_for needs a port or a path")
    if state in ("absent", "stopped"):
        return not os.path.exists(path)
    if not os.path.exists(path):
        return False
    regex = args.get("search_regex")
    if regex:
        text = _read_text(path, limit=64 << 20) or ""
        import re
        return re.search(regex, text, re.MULTILINE) is not None
    return True


def op_wait_for(args: WaitForArgs) -> WaitForReply:
    time.sleep(float(args.get("delay") or 0))
    start = time.time()
    deadline = start + float(args.get("timeout", 300))
    while True:
        if _wait_condition(args):
            return {"ok": True, "elapsed": round(time.time() - start, 3)}
        if time.time() >= deadline:
            return {"ok": False, "elapsed": round(time.time() - start, 3)}
        time.sleep(float(args.get("sleep") or 0.5))
