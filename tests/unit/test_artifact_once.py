"""The agent's zip is built (or read back from the controller's cache and checked) once per
run, however many host threads ask for it at once: each used to, 32 of 50 at a run's start."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from opsrunner.connections import artifact


def _clear() -> None:
    for cached in (artifact._package_sources, artifact._agent_version, artifact._agent_artifact):
        cached.cache_clear()


@pytest.mark.parametrize("kept", [False, True], ids=["built", "read-back"])
def test_hosts_asking_at_once_share_one_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: bool) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _clear()
    if kept:
        artifact.agent_artifact()  # the controller's cache holds the zip: it is read and checked
        _clear()
    done: list[str] = []
    real = {"_build_zip": artifact._build_zip, "_zip_version": artifact._zip_version}

    def slow(name: str):  # the real work, slowed so that every thread arrives while it runs
        def run(*args: object) -> object:
            done.append(name)
            time.sleep(0.05)
            return real[name](*args)
        return run

    for name in real:
        monkeypatch.setattr(artifact, name, slow(name))
    results: list[bytes] = []
    gate = threading.Barrier(16)

    def host() -> None:
        gate.wait()
        results.append(artifact.agent_artifact())

    threads = [threading.Thread(target=host) for _ in range(16)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _clear()
    assert len(results) == 16 and len(set(results)) == 1
    assert done == (["_zip_version"] if kept else ["_build_zip"])
