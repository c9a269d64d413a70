"""Issue 13 items 1-3: the path guard and pidfile trust, over local, ssh and the hostile wrappers.

Every deletion here happens inside the test's own tmp dirs. System paths are only ever named
in check mode (the guard refuses before anything is sized or removed); the home and
credential rules are proven for real against a private HOME in tmp (`env HOME=...`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LXC_TRANSPORTS, TRANSPORTS, pids_with, wait_for
from tests.modules.conftest import Target, _target_for


def with_home(target: Target, home: Path) -> Target:
    """The same host with HOME set to a private directory for the agent."""
    chain = list(target.host_vars.get("wrapper") or [])
    return Target({**target.host_vars, "wrapper": [*chain, f"env HOME={home}"]}, target.side)


# The guard runs in the agent; these tests build their trees and innocent processes on this
# machine, so they run over every transport that reaches it (the container is covered by the
# contract and module suites).
@pytest.fixture(params=[t for t in TRANSPORTS if t not in LXC_TRANSPORTS])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["local", "ssh+reaper+fd_holder"])
def edge_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for(str(request.param), request, tmp_path)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/precious (must survive), tmp/home (a private HOME) and tmp/d with links into both."""
    (tmp_path / "precious" / "sub").mkdir(parents=True)
    (tmp_path / "precious" / "keep.txt").write_text("precious\n")
    (tmp_path / "precious" / "sub" / "deep.txt").write_text("deep\n")
    home = tmp_path / "home"
    for name in (".ssh", ".config/gh", "code"):
        (home / name).mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key\n")
    (home / ".config" / "gh" / "hosts.yml").write_text("token\n")
    (home / "code" / "train.py").write_text("print(1)\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "link").symlink_to(tmp_path / "precious")
    (tmp_path / "d" / "homelink").symlink_to(home)
    (tmp_path / "d" / "etclink").symlink_to("/etc")
    return tmp_path


def snapshot(root: Path) -> list[str]:
    """Every path below root, except the agent's own cache (a private HOME's ~/.cache/opsrunner)."""
    paths = (str(p.relative_to(root)) for p in root.rglob("*"))
    return sorted(p for p in paths if not p.startswith(".cache"))


def clear(target: Target, paths: list[str], *args: str):
    return target.play([{"name": "clear", "clear_cache": {"paths": paths}}], *args)


# -- item 1: system paths, in check mode only ------------------------------------------------
SYSTEM_CASES = [
    ("//usr", "rule system: '//usr' (resolves to /usr) is inside the system tree /usr"),
    ("//tmp", "rule top-level: '//tmp' (resolves to /tmp) is the top-level directory /tmp"),
    ("/usr/lib", "rule system: '/usr/lib' is inside the system tree /usr"),
    ("/etc/ssh", "rule system: '/etc/ssh' is inside the system tree /etc"),
    ("/var/cache", "rule system: '/var/cache' is inside the system tree /var"),
    ("/tmp/a/../..", "rule root: '/tmp/a/../..' (resolves to /) is the filesystem root"),
    ("/*", "rule wildcard: '/*': '*' would match everything in /, which is the filesystem root"),
]
# '/' and '' never reach the agent now: preflight refuses them (exit 4) before any host is
# touched, and the agent's own refusal of them is checked apart (tests/e2e/test_refused_before_the_run.py).


def test_clear_cache_check_mode_refuses_system_paths(edge_target: Target, tree: Path) -> None:
    paths = [p for p, _ in SYSTEM_CASES] + [f"{tree}/d/etclink/", "~root/.ssh"]
    run = clear(edge_target, paths, "--check")
    msg = run.end("clear")["msg"]
    assert run.rc == 2, run.out
    assert msg.startswith("refusing to clear: ") and msg.endswith("(nothing was removed)")
    for _, expected in SYSTEM_CASES:
        assert expected in msg
    assert f"rule system: '{tree}/d/etclink/' (resolves to /etc) is inside the system tree /etc" in msg
    assert "rule credentials: '~root/.ssh' (resolves to /root/.ssh) is inside the credential " \
           "directory /root/.ssh" in msg
    assert "would remove" not in run.out and run.end("clear")["data"].get("removed") is None
    assert Path("/usr/lib").is_dir() and Path("/etc").is_dir()


def test_clear_cache_check_mode_names_the_resolved_path(target: Target, tree: Path) -> None:
    cache = tree / "cache"
    (cache / "inductor").mkdir(parents=True)
    (cache / "inductor" / "k.bin").write_bytes(b"x" * 2048)
    run = clear(target, [f"/{tree}//cache/./inductor"], "--check")
    assert run.rc == 0, run.out
    assert run.end("clear")["msg"] == f"would remove 2.0 KiB: {cache}/inductor (2.0 KiB, 1 files)"
    assert (cache / "inductor" / "k.bin").exists()


# -- item 2: symlinks and the home directory, for real inside tmp -----------------------------
def test_clear_cache_never_deletes_through_a_symlink(target: Target, tree: Path) -> None:
    before = snapshot(tree / "precious")
    for args in (("--check",), ()):
        run = clear(target, [f"{tree}/d/link/"], *args)
        assert run.rc == 2, run.out
        assert f"rule symlink: '{tree}/d/link/' (resolves to {tree}/precious) names the directory a " \
               "symlink points to" in run.end("clear")["msg"]
        assert snapshot(tree / "precious") == before
    run = clear(target, [f"{tree}/d/link"])  # the link itself: removed as a link
    assert run.rc == 0, run.out
    assert not (tree / "d" / "link").is_symlink()
    assert snapshot(tree / "precious") == before


def test_clear_cache_refuses_home_and_credentials(target: Target, tree: Path) -> None:
    home = tree / "home"
    before = snapshot(home)
    target = with_home(target, home)
    cases = {
        f"{tree}/d/homelink/": f"rule home: '{tree}/d/homelink/' (resolves to {home}) is the home directory {home}",
        "~": f"rule home: '~' (resolves to {home}) is the home directory {home}",
        "~/*": f"rule wildcard: '~/*': '*' would match everything in {home}, which is the home directory",
        "~/.*": f"rule wildcard: '~/.*': '.*' would match everything in {home}",
        "~/.ssh": f"rule credentials: '~/.ssh' (resolves to {home}/.ssh) is inside the credential directory",
        "~/.config/gh": f"is inside the credential directory {home}/.config",
        str(tree): f"rule home: '{tree}' is {tree}, a parent of the home directory {home}",
    }
    for args in (("--check",), ()):  # every refusal is listed; nothing at all is removed
        run = clear(target, list(cases), *args)
        assert run.rc == 2, run.out
        for expected in cases.values():
            assert expected in run.end("clear")["msg"]
        assert snapshot(home) == before
    ok = clear(target, ["~/code"])  # below home, not a credential directory: allowed
    assert ok.rc == 0, ok.out
    assert not (home / "code").exists() and (home / ".ssh" / "id_ed25519").exists()


# -- item 2: deploy_code delete: true ---------------------------------------------------------
@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "train.py").write_text("print('v1')\n")
    (root / "sub" / "mod.py").write_text("X = 1\n")
    return root


def deploy(target: Target, src: Path, dest: str, *args: str, delete: bool = True):
    return target.play([{"name": "deploy", "deploy_code": {"src": str(src), "dest": dest, "delete": delete}}],
                       *args)


def test_deploy_delete_refuses_home_and_symlinked_dest(target: Target, tree: Path, src: Path) -> None:
    home = tree / "home"
    before_home, before_precious = snapshot(home), snapshot(tree / "precious")
    homed = with_home(target, home)
    for args in (("--check",), ()):
        run = deploy(homed, src, "~", *args)
        assert run.rc == 2, run.out
        assert f"rule home: '{home}' is the home directory {home}" in run.end("deploy")["msg"]
        run = deploy(target, src, f"{tree}/d/link", *args)
        assert run.rc == 2, run.out
        assert f"rule symlink: dest '{tree}/d/link' is a symlink to {tree}/precious; files are never " \
               "deleted through a symlink" in run.end("deploy")["msg"]
    assert snapshot(home) == before_home and snapshot(tree / "precious") == before_precious
    # Through the real path, delete: true does its job (inside dest only).
    real = tree / "deployed"
    real.mkdir()
    (real / "stale.py").write_text("old\n")
    run = deploy(target, src, str(real))
    assert run.rc == 0, run.out
    assert snapshot(real) == ["sub", "sub/mod.py", "train.py"]


def test_deploy_never_writes_or_deletes_outside_dest(target: Target, tree: Path, src: Path) -> None:
    dest = tree / "code"
    dest.mkdir()
    (dest / "sub").symlink_to(tree / "precious")  # a directory of dest that leads elsewhere
    before = snapshot(tree / "precious")
    for args in (("--check",), ()):
        run = deploy(target, src, str(dest), *args, delete=False)
        assert run.rc == 2, run.out
        assert f"rule outside-dest: '{dest}/sub/mod.py' (resolves to {tree}/precious/mod.py) is outside " \
               f"dest {dest}, refusing to write it" in run.end("deploy")["msg"]
    assert snapshot(tree / "precious") == before and not (dest / "train.py").exists()


# -- item 3: pidfile trust --------------------------------------------------------------------
@pytest.fixture
def innocent(cleanup_marker: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process group: `sh` leading it, with a `sleep` child (both marked)."""
    # `read` on a pipe nobody writes to keeps `sh` alive without forking: a loop of
    # `sleep 0.2` would show, at every fork, a copy of `sh` that carries the marker too.
    script = f"sleep {cleanup_marker} & sleep {cleanup_marker} & read never"
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE,
                            start_new_session=True)
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 3, 5)
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdin is not None
    proc.stdin.close()


def kill_old(target: Target, *args: str, **kw: object):
    return target.play([{"name": "kill", "kill_old": {"grace": 2, **kw}}], *args)


def _verify(target: Target, **kw: object):
    return target.play([{"name": "verify", "verify": kw, "timeout": 60}])


def test_untrusted_pidfile_is_refused_not_killed(target: Target, innocent: subprocess.Popen[bytes],
                                                 cleanup_marker: str) -> None:
    pidfile = target.work / "p.pid"
    pidfile.write_text(f"{innocent.pid}\n")  # echo $PID > p.pid
    expected = f'pid {innocent.pid} (from {pidfile}) is "sh -c sleep {cleanup_marker} &'
    for args in (("--check",), ()):
        run = kill_old(target, *args, pidfile=str(pidfile))
        msg = run.end("kill")["msg"]
        assert run.rc == 2, run.out
        assert msg.startswith("rule pidfile-trust: " + expected), msg
        assert f"and there is no launch record {target.work}/p.launch.json to show it is the job" in msg
    run = _verify(target, pidfile=str(pidfile), processes=1)
    assert run.rc == 2 and expected in run.end("verify")["msg"]
    assert len(pids_with(cleanup_marker)) == 3 and innocent.poll() is None


def test_pidfile_with_a_foreign_launch_record(target: Target, innocent: subprocess.Popen[bytes],
                                              cleanup_marker: str) -> None:
    pidfile, meta = target.work / "p.pid", target.work / "p.launch.json"
    pidfile.write_text(f"{innocent.pid}\n")
    # The record of a job launched earlier with this pid, since gone (a reused pid).
    meta.write_text(json.dumps({"pid": innocent.pid, "start": 1, "argv": ["python3", "train.py"],
                                "started_at": 1700000000.0}))
    run = kill_old(target, pidfile=str(pidfile))
    msg = run.end("kill")["msg"]
    assert run.rc == 2
    assert "started at " in msg and ", not the job launched at 2023-11-" in msg
    meta.write_text(json.dumps({"pid": 1, "start": 1, "started_at": 1700000000.0}))
    run = _verify(target, pidfile=str(pidfile), processes=1)
    assert "but the launch record is for pid 1 launched at 2023-11-" in run.end("verify")["msg"]
    # The same pid and start time, recorded in another boot: clock ticks restart at boot, and
    # that boot's job ended with it. The pidfile is stale: nothing is signalled or counted, and
    # that is no error (after a reboot a restart must not need the pidfile removed by hand).
    start = int(Path(f"/proc/{innocent.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    meta.write_text(json.dumps({"pid": innocent.pid, "start": start, "started_at": 1700000000.0,
                                "boot_id": "00000000-0000-0000-0000-000000000000"}))
    run = kill_old(target, pidfile=str(pidfile))
    assert run.rc == 0 and run.end("kill")["status"] == "ok", run.out
    assert innocent.poll() is None  # alive: not signalled
    assert _verify(target, pidfile=str(pidfile), processes=1).end("verify")["status"] == "failed"  # not counted
    meta.write_text(json.dumps({"pid": innocent.pid, "start": start, "started_at": 1700000000.0,
                                "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip()}))
    assert kill_old(target, "--check", pidfile=str(pidfile)).end("kill")["status"] == "changed"
    assert len(pids_with(cleanup_marker)) == 3


def test_pattern_vouches_for_the_pid_and_groups_need_a_leading_job(
        target: Target, innocent: subprocess.Popen[bytes], cleanup_marker: str) -> None:
    children = [pid for pid in pids_with(cleanup_marker) if pid != innocent.pid]
    job = children[0]  # in the innocent group, which it does not lead
    pidfile = target.work / "p.pid"
    pidfile.write_text(f"{job}\n")
    run = kill_old(target, pidfile=str(pidfile), pattern=f"^sleep {cleanup_marker}$", user=os.getuid())
    assert run.rc == 0, run.out
    killed = sorted(run.end("kill")["data"]["pids"])
    assert killed == sorted(children)  # the pattern's matches; not the group leader `sh`
    assert wait_for(lambda: pids_with(cleanup_marker) == [innocent.pid], 5)
    assert innocent.poll() is None


def test_launched_job_is_trusted(target: Target, cleanup_marker: str) -> None:
    pidfile = target.work / "j.pid"
    run = target.play([{"name": "launch", "launch_detached": {
        "command": f"sleep {cleanup_marker} & sleep {cleanup_marker}; wait", "pidfile": str(pidfile)}}])
    assert run.rc == 0, run.out
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 3, 5)
    assert _verify(target, pidfile=str(pidfile), processes=1).rc == 0
    run = kill_old(target, pidfile=str(pidfile))
    assert run.rc == 0, run.out
    assert len(run.end("kill")["data"]["pids"]) == 3  # the job leads its group: all of it
    assert wait_for(lambda: pids_with(cleanup_marker) == [], 5)
