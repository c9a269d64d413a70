"""The files deploy_code sends: the local files with their digests, which of them differ
from the target's, and the tar stream that carries them (plain deploys and releases)."""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import posixpath
import stat
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from opsrunner.modules.base import TaskContext
    from opsrunner.remote.protocol_files import FileDigest, OtherFile, ReadArgs

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


#: A file's digest by its path and what stat says of it (device, inode, size, mtime, ctime):
#: deploy_code to N hosts hashed the same tree N times (50 hosts x a 20 MB tree: 1 GB of
#: sha256 in the controller). Any write to the file changes its mtime and ctime.
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()
_DIGESTS_MAX = 200_000
#: A file written this recently may be written again within the same timestamp tick (coarse
#: on some filesystems) without its stat changing: its digest is not kept ("racily clean").
RACY_S = 2.0


def sha256_of(path: Path, st: os.stat_result | None = None) -> str:
    """The file's sha256 (`st`: its stat, where the caller has it already)."""
    st = st or path.stat()
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if time.time() - max(st.st_mtime, st.st_ctime) > RACY_S:
        with _DIGESTS_LOCK:
            if len(_DIGESTS) >= _DIGESTS_MAX:
                _DIGESTS.clear()
            _DIGESTS[key] = digest
    return digest


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
    files = [_local_file(rel, path, mode) for rel, path in rels if not excluded(rel, exclude)]
    return root, files


def _local_file(rel: str, path: Path, mode: int | None) -> LocalFile:
    st = path.stat()  # once: its digest is kept by it, and its mode read from it
    return LocalFile(rel, path, sha256_of(path, st), mode if mode is not None else stat.S_IMODE(st.st_mode))


def differs(local: LocalFile, remote: FileDigest | OtherFile | None) -> bool:
    if remote is None or "type" in remote:  # missing, or not a regular file there
        return True
    return remote["sha256"] != local.sha256 or remote["mode"] != local.mode


@contextmanager
def tar_of(files: list[LocalFile]) -> Iterator[IO[bytes]]:
    """The files as an uncompressed tar stream, rewound (a payload for the agent's write and release)."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        with tarfile.open(fileobj=spool, mode="w|") as tar:
            for f in files:
                info = tarfile.TarInfo(f.rel)
                info.size = f.path.stat().st_size
                info.mode = f.mode
                with f.path.open("rb") as fh:
                    tar.addfile(info, fh)
        spool.seek(0)
        yield cast(IO[bytes], spool)


def files_diff(ctx: TaskContext, root: str, changed: list[LocalFile], extra: list[str],
               shown_root: str | None = None) -> str:
    """-D: a unified diff of each changed file against its copy on the target under `root`
    (none there: against nothing), and a line for each file that goes. `shown_root`: where the
    files are seen from (a release's files through <dest>/current), when not `root`."""
    if not changed and not extra:
        return ""
    from opsrunner.connections import ops

    shown = shown_root or root
    request: ReadArgs = {"paths": [posixpath.join(root, f.rel) for f in changed]}
    old = ctx.agent(ops.READ, request)["contents"] if changed else {}
    out: list[str] = []
    for f in changed:
        path = posixpath.join(shown, f.rel)
        try:
            new = f.path.read_text("utf-8")
        except UnicodeDecodeError:
            out.append(f"Binary file {path} differs\n")
            continue
        before = old.get(posixpath.join(root, f.rel)) or ""
        out += difflib.unified_diff(before.splitlines(True), new.splitlines(True), f"{path} (before)",
                                    f"{path} (after)")
    out += [f"deleted: {posixpath.join(shown, e)}\n" for e in extra]
    return "".join(out)

