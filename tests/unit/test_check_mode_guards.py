"""Check mode (-C) refuses what a real run refuses: every op that overwrites or deletes judges
its paths with the guards whether or not it only reports. Each op is called in this process
(as an agent worker runs it) in both modes, on real temporary paths that a guard protects: a
credential directory of a home (HOME set to a temporary folder), and /etc/hostname, which the
guard refuses before anything could be written (the writers are also made to fail here)."""

from __future__ import annotations

import base64
import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from opsrunner.remote import agent, files, fsops, guards
from opsrunner.remote.guards import Refused

MODES = pytest.mark.parametrize("check", [True, False], ids=["check", "run"])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME whose .ssh holds files the credential rule guards."""
    home = tmp_path / "home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "config").write_text("Host *\n")
    (ssh / "authorized_keys").write_text("ssh-ed25519 AAAA key\n")
    (ssh / "link").symlink_to(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    return home


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): (os.readlink(p) if p.is_symlink() else p.read_text())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


@pytest.fixture
def no_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard that failed to refuse must not get to write /etc: every writer fails the test."""
    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"an op wrote past the guard: {args}")

    monkeypatch.setattr(fsops, "_write_atomic", boom)
    for name in ("unlink", "replace", "rename", "symlink", "chmod", "lchown", "utime"):
        monkeypatch.setattr(os, name, boom)


def refused(call: Any) -> str:
    with pytest.raises(Refused) as caught:
        call()
    return str(caught.value.rule)


# -- lineinfile: refused in check mode too (it used to say "would change") --------------------
@MODES
def test_lineinfile_refuses_a_guarded_path(home: Path, check: bool) -> None:
    before = snapshot(home)
    path = str(home / ".ssh" / "config")
    rule = refused(lambda: fsops.op_lineinfile({"path": path, "line": "Host evil", "check": check}))
    assert rule == "credentials"
    assert snapshot(home) == before


@MODES
def test_lineinfile_refuses_etc_hostname(no_writes: None, check: bool) -> None:
    args: Any = {"path": "/etc/hostname", "line": "opsrunner-never-written", "create": True, "check": check}
    assert refused(lambda: fsops.op_lineinfile(args)) == "system"


@MODES
def test_lineinfile_unchanged_needs_no_guard(home: Path, check: bool) -> None:
    reply = fsops.op_lineinfile({"path": str(home / ".ssh" / "config"), "line": "Host *", "check": check})
    assert reply == {"changed": False, "msg": ""}


@MODES
def test_lineinfile_through_the_dispatcher_names_the_rule(home: Path, check: bool) -> None:
    reply = agent.dispatch({"op": "lineinfile", "args": {"path": "~/.ssh/config", "line": "X", "check": check}})
    assert reply.get("refused") == ["credentials"], reply
    assert f"'{home}/.ssh/config' is inside the credential directory {home}/.ssh" in str(reply.get("error"))


# -- copy / template (fs_put) ------------------------------------------------------------------
@MODES
def test_fs_put_refuses_a_guarded_path(home: Path, check: bool) -> None:
    before = snapshot(home)
    content = base64.b64encode(b"ssh-ed25519 BBBB intruder\n").decode()
    dest = str(home / ".ssh" / "authorized_keys")
    assert refused(lambda: fsops.op_fs_put({"dest": dest, "content_b64": content, "check": check})) == "credentials"
    assert snapshot(home) == before


@MODES
def test_fs_put_refuses_etc_hostname(no_writes: None, check: bool) -> None:
    content = base64.b64encode(b"opsrunner-never-written\n").decode()
    assert refused(lambda: fsops.op_fs_put({"dest": "/etc/hostname", "content_b64": content,
                                            "check": check})) == "system"


# -- file: absent and link replace --------------------------------------------------------------
@MODES
@pytest.mark.parametrize("state,extra", [("absent", {}), ("link", {"src": "/tmp"})])
def test_fs_file_refuses_a_guarded_path(home: Path, check: bool, state: str, extra: dict[str, str]) -> None:
    before = snapshot(home)
    name = "config" if state == "absent" else "link"
    args: Any = {"path": str(home / ".ssh" / name), "state": state, "check": check, **extra}
    assert refused(lambda: fsops.op_fs_file(args)) == "credentials"
    assert snapshot(home) == before


@MODES
def test_fs_file_absent_refuses_etc_hostname(no_writes: None, check: bool) -> None:
    assert refused(lambda: fsops.op_fs_file({"path": "/etc/hostname", "state": "absent", "check": check})) == "system"


# -- deploy_code: write and delete (check mode sends stat alone, which judges for both) --------
def _tar(name: str, data: bytes) -> io.TextIOWrapper:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))
    raw.seek(0)
    return io.TextIOWrapper(raw)


@MODES
def test_deploy_write_refuses_a_guarded_path(home: Path, check: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(home)
    dest = str(home / ".ssh")
    if check:
        rule = refused(lambda: files.op_stat({"dest": dest, "files": ["authorized_keys"]}))
    else:
        monkeypatch.setattr(files.sys, "stdin", _tar("authorized_keys", b"intruder\n"))
        rule = refused(lambda: files.op_write({"dest": dest}))
    assert rule == "credentials"
    assert snapshot(home) == before


@MODES
def test_deploy_write_refuses_etc(no_writes: None, check: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if check:
        assert refused(lambda: files.op_stat({"dest": "/etc", "files": ["hostname"]})) == "system"
    else:
        monkeypatch.setattr(files.sys, "stdin", _tar("hostname", b"opsrunner-never-written\n"))
        assert refused(lambda: files.op_write({"dest": "/etc"})) == "system"


@MODES
def test_deploy_delete_refuses_a_guarded_dest(home: Path, check: bool) -> None:
    before = snapshot(home)
    dest = str(home / ".ssh")
    if check:
        rule = refused(lambda: files.op_stat({"dest": dest, "files": [], "list_extra": True}))
    else:
        rule = refused(lambda: files.op_delete({"dest": dest, "files": ["config"]}))
    assert rule == "credentials"
    assert snapshot(home) == before


@MODES
def test_deploy_delete_refuses_a_guarded_extra_file(tmp_path: Path, check: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """dest itself is allowed, but a file under it is not: a service account's home inside dest
    holds credentials. stat (all that check mode sends) refuses it as delete would."""
    dest = tmp_path / "srv"
    (dest / "svc" / ".ssh").mkdir(parents=True)
    (dest / "svc" / ".ssh" / "id_ed25519").write_text("secret\n")
    (dest / "stale.py").write_text("old\n")
    monkeypatch.setattr(guards, "home_dirs", lambda: (set(), {str(dest / "svc")}))
    before = snapshot(dest)
    if check:
        rule = refused(lambda: files.op_stat({"dest": str(dest), "files": ["app.py"], "list_extra": True}))
    else:
        rule = refused(lambda: files.op_delete({"dest": str(dest), "files": ["stale.py", "svc/.ssh/id_ed25519"]}))
    assert rule == "credentials"
    assert snapshot(dest) == before


def test_deploy_stat_lists_extras_that_may_be_deleted(tmp_path: Path) -> None:
    dest = tmp_path / "app"
    (dest / "sub").mkdir(parents=True)
    (dest / "sub" / "old.py").write_text("x\n")
    (dest / "keep.py").write_text("y\n")
    reply = files.op_stat({"dest": str(dest), "files": ["keep.py"], "list_extra": True})
    assert reply["extra"] == ["sub/old.py"]


# -- clear_cache -------------------------------------------------------------------------------
@MODES
def test_clear_refuses_a_guarded_path(home: Path, check: bool) -> None:
    before = snapshot(home)
    reply = files.op_clear({"paths": [str(home / ".ssh" / "config"), "/etc/hostname"], "check_mode": check})
    assert reply.get("refused") == ["credentials", "system"], reply
    assert "(nothing was removed)" in str(reply.get("error"))
    assert snapshot(home) == before and Path("/etc/hostname").exists()
