"""Files written whole or not at all: a temp file beside the target, then a rename."""
from __future__ import annotations

import os


def create_temp_beside(path: str, mode: int = 0o600) -> tuple[int, str]:
    """(fd, name) of a new file next to path, to write and rename over it. The name is random
    and the file created with O_EXCL|O_NOFOLLOW: never an existing file or a link planted in
    a shared directory, and unique among hosts that share it (their pids may be equal: PID
    namespaces, containers)."""
    while True:
        name = f"{path}.opsrunner-tmp-{os.urandom(6).hex()}"
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode), name
        except FileExistsError:
            continue


def fsync_dir(folder: str) -> None:
    """Make a rename in folder durable (the directory entry itself, not only the data)."""
    fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """path holds data, or its old content, even after a power cut: the data is on disk
    (fsync) before the rename, and the rename is (fsync of the directory) before return."""
    fd, tmp = create_temp_beside(path, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.rename(tmp, path)
    fsync_dir(os.path.dirname(path))
