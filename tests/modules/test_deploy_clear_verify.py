"""deploy_code, clear_cache and verify over local, ssh, and ssh through the hostile wrappers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import pids_with, wait_for
from tests.modules.conftest import Target


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "train.py").write_text("print('v1')\n")
    (root / "pkg" / "model.py").write_text("LAYERS = 4\n")
    (root / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0junk")
    (root / "run.sh").write_text("#!/bin/sh\nexec python3 train.py\n")
    (root / "run.sh").chmod(0o755)
    return root


def deploy(target: Target, src: Path, dest: Path, *args: str, **extra: object):
    task = {"name": "deploy", "deploy_code": {"src": str(src), "dest": str(dest),
                                              "exclude": ["__pycache__", "*.pyc"], **extra}, "timeout": 120}
    return target.play([task], *args)


def test_deploy_is_idempotent_and_sends_only_changes(target: Target, src: Path) -> None:
    dest = target.work / "remote" / "code"
    run = deploy(target, src, dest)
    assert run.rc == 0, run.out
    assert sorted(run.end("deploy")["data"]["changed_files"]) == ["pkg/model.py", "run.sh", "train.py"]
    assert (dest / "pkg" / "model.py").read_text() == "LAYERS = 4\n"
    assert not (dest / "pkg" / "__pycache__").exists()
    assert (dest / "run.sh").stat().st_mode & 0o777 == 0o755
    again = deploy(target, src, dest)
    assert again.end("deploy")["status"] == "ok"
    inode = (dest / "train.py").stat().st_ino
    (src / "train.py").write_text("print('v2')\n")
    (src / "pkg" / "model.py").chmod(0o600)
    third = deploy(target, src, dest, "--diff")
    assert third.end("deploy")["status"] == "changed"
    assert sorted(third.end("deploy")["data"]["changed_files"]) == ["pkg/model.py", "train.py"]
    assert "-print('v1')\n+print('v2')" in third.out
    assert (dest / "train.py").stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert (dest / "pkg" / "model.py").stat().st_mode & 0o777 == 0o600
    assert not [p for p in dest.rglob("*opsrunner-tmp*")]


def test_deploy_check_mode_delete_backup_and_single_file(target: Target, src: Path) -> None:
    dest = target.work / "remote" / "code"
    dry = deploy(target, src, dest, "--check")
    assert dry.end("deploy")["status"] == "changed" and "would deploy 3 of 3" in dry.end("deploy")["msg"]
    assert not dest.exists()
    assert deploy(target, src, dest).rc == 0
    (dest / "stale.py").write_text("old\n")
    (src / "train.py").write_text("print('v3')\n")
    run = deploy(target, src, dest, delete=True, backup=True)
    assert run.rc == 0, run.out
    assert run.end("deploy")["data"]["deleted_files"] == ["stale.py"]
    assert not (dest / "stale.py").exists()
    backups = list(dest.glob("train.py.*~"))
    assert len(backups) == 1 and backups[0].read_text() == "print('v1')\n"
    single = target.play([{"name": "one", "deploy_code": {"src": str(src / "train.py"),
                                                          "dest": str(target.work / "remote/one/renamed.py"),
                                                          "mode": "0640"}}])
    assert single.rc == 0, single.out
    assert (target.work / "remote/one/renamed.py").stat().st_mode & 0o777 == 0o640


def test_deploy_100mb_streams(chain_target: Target, tmp_path: Path) -> None:
    target = chain_target
    big = tmp_path / "bigsrc"
    big.mkdir()
    chunk = os.urandom(1 << 20)
    with (big / "weights.bin").open("wb") as fh:
        for i in range(100):
            fh.write(chunk[i:] + chunk[:i])
    run = deploy(target, big, tmp_path / "remote" / "big")
    assert run.rc == 0, run.out
    assert (tmp_path / "remote/big/weights.bin").read_bytes() == (big / "weights.bin").read_bytes()


def test_clear_cache_reports_bytes_and_is_idempotent(target: Target) -> None:
    cache = target.work / "caches"
    (cache / "torchinductor_x" / "sub").mkdir(parents=True)
    (cache / "torchinductor_x" / "sub" / "k.bin").write_bytes(b"x" * 5000)
    (cache / "triton").mkdir()
    (cache / "triton" / "t.bin").write_bytes(b"y" * 3000)
    keep = cache / "keep.txt"
    keep.write_text("keep")
    task = {"name": "clear", "clear_cache": {"paths": [str(cache / "torchinductor_*"), str(cache / "triton")]}}
    dry = target.play([task], "--check")
    assert dry.end("clear")["status"] == "changed" and (cache / "triton").exists()
    run = target.play([task])
    assert run.rc == 0, run.out
    assert run.end("clear")["data"]["bytes"] == 8000
    assert not (cache / "triton").exists() and not (cache / "torchinductor_x").exists()
    assert keep.exists()
    assert target.play([task]).end("clear")["status"] == "ok"


# "" and "/" never reach the target now: preflight refuses them (tests/e2e/test_refused_before_the_run.py,
# which also has the agent refuse them).
@pytest.mark.parametrize("path,reason", [
    ("~", "rule home: '~' (resolves to "),
    ("/usr", "rule system: '/usr' is inside the system tree /usr"),
    ("/opt", "rule top-level: '/opt' is the top-level directory /opt"),
    ("/tmp/a/../..", "rule root: '/tmp/a/../..' (resolves to /) is the filesystem root"),
    ("/*", "rule wildcard: '/*': '*' would match everything in /"),
])
def test_clear_cache_refuses_dangerous_targets(edge_target: Target, path: str, reason: str) -> None:
    target = edge_target
    # Run in check mode: the refusal happens before anything else, and a bug here can then
    # never delete anything on the machine running the tests.
    run = target.play([{"name": "clear", "clear_cache": {"paths": [path]}}], "--check")
    assert run.rc == 2
    assert "refusing to clear" in run.end("clear")["msg"] and reason in run.end("clear")["msg"]


def test_clear_cache_refusal_removes_nothing(target: Target) -> None:
    cache = target.work / "many"
    for i in range(5):
        (cache / f"d{i}").mkdir(parents=True)
    (target.work / "victim").mkdir()
    run = target.play([{"name": "clear", "clear_cache": {
        "paths": [str(target.work / "victim"), str(cache / "*")], "max_matches": 3}}])
    assert run.rc == 2
    assert "matches 5 entries (more than max_matches=3)" in run.end("clear")["msg"]
    assert (target.work / "victim").exists() and len(list(cache.iterdir())) == 5


def _verify(target: Target, **args: object):
    return target.play([{"name": "verify", "verify": args, "timeout": 60}])


def test_verify_diagnoses(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    w = target.work
    log, pid = str(w / "t.log"), str(w / "t.pid")
    # never started
    run = _verify(target, pidfile=pid, processes=1, log=log)
    assert "diagnosis: never started: no pidfile at" in run.end("verify")["msg"]
    # exited with code N (crash), with the log's last lines
    launch = {"name": "launch", "launch_detached": {
        "command": target.trainer_command(cleanup_marker, w / "ck.json", "--crash-after", "3", "--step-time", "0.2"),
        "log": log, "pidfile": pid}}
    assert target.play([launch]).rc == 0
    # stable_for: the checks must keep passing, so a job that dies right after start is caught
    # however fast the machine is (without it verify may pass before the crash).
    run = _verify(target, pidfile=pid, processes=1, log=log, within=5, stable_for=2, log_not_regex="Traceback")
    msg = run.end("verify")["msg"]
    assert run.rc == 2
    assert "diagnosis: the job (pid" in msg and "exited with code 1" in msg
    assert "RuntimeError: simulated crash" in msg and f"last lines of {log}" in msg
    # killed by a signal
    launch["launch_detached"]["command"] = target.trainer_command(cleanup_marker, w / "ck.json")
    assert target.play([launch]).rc == 0
    job = int(Path(pid).read_text())  # as the target reports it (the container's own pid there)
    os.kill(target.host_pid(Path(pid)), signal.SIGKILL)
    assert wait_for((w / "t.exit").exists, 5)
    run = _verify(target, pidfile=pid, processes=1, log=log)
    assert f"diagnosis: the job (pid {job}) was killed by signal 9 (SIGKILL)" in run.end("verify")["msg"]
    # running but the log stopped growing (hang)
    launch["launch_detached"]["command"] = target.trainer_command(cleanup_marker, w / "ck.json", "--hang-after", "1")
    assert target.play([launch]).rc == 0
    # From its last line on, not from a fixed sleep: a loaded machine may start it late.
    assert wait_for(lambda: "hanging (simulated)" in Path(log).read_text(), 20)
    time.sleep(2)  # longer than log_grows: the last growth is now too long ago
    run = _verify(target, pidfile=pid, processes=1, log=log, log_grows=1.5)
    assert f"diagnosis: hung: the job (pid {Path(pid).read_text().strip()}) is running but its log {log} " \
        "has not grown for " in run.end("verify")["msg"]
    os.kill(target.host_pid(Path(pid)), signal.SIGKILL)


def test_verify_wrong_process_count_lists_them_and_success(edge_target: Target, cleanup_marker: str) -> None:
    target = edge_target
    w = target.work
    for i in range(2):
        assert target.play([{"name": "launch", "launch_detached": {
            "command": target.trainer_command(cleanup_marker, w / f"ck{i}.json"), "log": str(w / f"l{i}.log"),
            "pidfile": str(w / f"p{i}.pid")}}]).rc == 0
    run = _verify(target, pattern=cleanup_marker, processes=1)
    msg = run.end("verify")["msg"]
    assert "processes: expected exactly 1, got 2" in msg
    assert msg.count(cleanup_marker) >= 2
    ok = _verify(target, pattern=cleanup_marker, min_processes=2, log=str(w / "l0.log"), log_grows=2,
                 log_regex="ready: training", stable_for=1)
    assert ok.rc == 0, ok.out
    assert ok.end("verify")["data"]["processes"] == 2
    assert wait_for(lambda: len(pids_with(cleanup_marker)) == 2, 1)


def test_verify_port_and_gpu_memory(edge_target: Target) -> None:
    import socket

    target = edge_target
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        ok = _verify(target, port=port)
        assert ok.rc == 0, ok.out
    closed = _verify(target, port=port)
    assert closed.rc == 2
    assert f"port: expected port {port} listening, got not listening" in closed.end("verify")["msg"]
    bin_dir = target.work / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nprintf '0, 21000\\n1, 300\\n'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    gpu = Target({**target.host_vars, "wrapper": [*(target.host_vars.get("wrapper") or []),
                                                  f"env PATH={bin_dir}:/usr/bin:/bin"]}, target.side)
    assert _verify(gpu, gpu_min_memory_mb=20000, gpus=[0]).rc == 0
    both = _verify(gpu, gpu_min_memory_mb=20000)
    assert both.rc == 2
    assert "gpu_min_memory_mb: expected >= 20000 MB on each GPU" in both.end("verify")["msg"]


def test_verify_runs_nvidia_smi_only_where_asked(edge_target: Target) -> None:
    """nvidia-smi takes ~0.1 s on a GPU host and can hang on a GPU in a bad state: a verify
    that checks no GPU and passes must not run it; gpu_memory asks for the report, and a
    failing verdict reads it for its diagnosis."""
    target = edge_target
    bin_dir = target.work / "fakebin"
    bin_dir.mkdir()
    calls = target.work / "smi_calls"
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\necho x >> {calls}\nprintf '0, 21000\\n1, 300\\n'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    gpu = Target({**target.host_vars, "wrapper": [*(target.host_vars.get("wrapper") or []),
                                                  f"env PATH={bin_dir}:/usr/bin:/bin"]}, target.side)
    log = target.work / "up.log"
    log.write_text("step 1\n")

    plain = _verify(gpu, log=str(log))
    assert plain.rc == 0, plain.out
    assert plain.end("verify")["data"]["gpu_memory_mb"] is None and not calls.exists()
    assert "GPU memory" not in plain.end("verify")["msg"]

    asked = _verify(gpu, log=str(log), gpu_memory=True)
    assert asked.rc == 0, asked.out
    assert "GPU memory 0: 21000 MB, 1: 300 MB" in asked.end("verify")["msg"]
    assert calls.read_text().count("x") == 1

    listed = _verify(gpu, log=str(log), gpus=[1])
    assert "GPU memory 1: 300 MB" in listed.end("verify")["msg"] and calls.read_text().count("x") == 2

    failing = _verify(gpu, log=str(target.work / "missing.log"))
    assert failing.rc == 2
    assert failing.end("verify")["data"]["gpu_memory_mb"] == {"0": 21000.0, "1": 300.0}
    assert calls.read_text().count("x") == 3
