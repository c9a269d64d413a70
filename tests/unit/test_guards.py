"""The agent's path rules as pure logic (given mounts and homes), and its ops through its dispatcher."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.agent_ns import AGENT

CTX = AGENT["Context"](mounts={"/", "/mnt/data", "/home/u/nfs", "/tmp/space dir"},
                       homes={"/home/u"}, every_home={"/home/u", "/srv/svc"})


@pytest.mark.parametrize("path,rule", [
    ("/var/tmp/x", None), ("/var/cache/apt", None), ("/var/cache/torch/k", None),
    ("/var/tmp", "system"), ("/var/cache", "system"), ("/var/lib/x", "system"), ("/lib32/x", "system"),
    ("/root", "system"), ("/root/.cache/triton", None), ("/boot/efi", "system"), ("/run/user/0", "system"),
    ("/mnt/data", "mount-point"), ("/mnt/data/cache", None), ("/mnt", "top-level"), ("/home/u/nfs", "mount-point"),
    ("/home/u", "home"), ("/home", "home"), ("/home/u/.cache", None),
    ("/home/u/.aws/credentials", "credentials"), ("/srv/svc/.kube", "credentials"), ("/srv/svc", None),
    ("/home/u/proj", None),
    ("/tmp/space dir", "mount-point"), ("/opt", "top-level"), ("/", "root"),
])
def test_rules(path: str, rule: str | None) -> None:
    found = AGENT["judge"](path, CTX)
    assert (found[0] if found else None) == rule, found


def test_a_mount_below_is_refused() -> None:
    assert AGENT["judge"]("/home/u", AGENT["Context"](mounts={"/home/u/nfs"}, homes=set()))[0] == "mount-point"
    assert AGENT["judge"]("/home/u", AGENT["Context"](mounts={"/home/u/nfs"}, homes=set()))[1] == \
        "contains the mount point /home/u/nfs"


def test_mountinfo_parsing(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text("36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n"
                    "37 35 98:0 / / rw - ext4 /dev/root rw\n")
    assert AGENT["mount_points"](str(info)) == {"/mnt/with space", "/"}
    assert "/proc" in AGENT["mount_points"]()  # the real table of this machine


def agent_op(op: str, args: dict[str, Any]) -> dict[str, Any]:
    """One op through the agent's own dispatcher (as its server runs each request)."""
    reply: dict[str, Any] = AGENT["dispatch"]({"op": op, "args": args})
    return reply


def test_delete_op_never_leaves_dest(tmp_path: Path) -> None:
    dest, precious = tmp_path / "dest", tmp_path / "precious"
    dest.mkdir()
    precious.mkdir()
    (precious / "x").write_text("keep")
    (dest / "sub").symlink_to(precious)
    (dest / "stale").write_text("old")
    reply = agent_op("delete", {"dest": str(dest), "files": ["stale", "sub/x", "../precious/x"]})
    assert reply["refused"] == ["outside-dest"]
    assert f"'{dest}/sub/x' (resolves to {precious}/x) is outside dest {dest}" in reply["error"]
    assert (precious / "x").exists() and (dest / "stale").exists()  # judged all before the first unlink
    reply = agent_op("delete", {"dest": str(dest), "files": ["stale", "sub"]})
    assert reply == {"removed": ["stale", "sub"]}  # the link itself, not what it points to
    assert (precious / "x").exists()


def test_a_fifo_pidfile_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "job.pid"
    os.mkfifo(fifo)
    reply = agent_op("kill", {"pidfile": str(fifo)})  # a blocking read would hang until the timeout
    assert reply == {"error": f"pidfile {fifo} is a FIFO, not a regular file: refusing to use it"}
