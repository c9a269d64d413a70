"""The agent's wire format (remote/wire.py): JSON through the C accelerator directly, the same
documents as the json module reads and writes; frames; and an agent start that loads none of
the modules it avoids (re, json, enum, signal, ctypes, threading: ~20 ms of CPU per start)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from opsrunner.remote import jobfiles, wire
from opsrunner.remote.protocol import MAX_DATA, frame
from tests.agent_ns import unpack_agent

ALPHABET = "aZ09 \"\\/\b\f\n\r\t\x00\x1f\x7f\u00e9\u2028\u4e2d\U0001f600\udcff"


def _document(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 2**63, -(2**70), rng.randrange(-10**6, 10**6)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e300, 1e-300, 2.5, rng.uniform(-1e6, 1e6), math.inf, -math.inf])
    if kind in (4, 5):
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return [_document(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {"".join(rng.choice(ALPHABET) for _ in range(rng.randrange(6))): _document(rng, depth + 1)
            for _ in range(rng.randrange(5))}


@pytest.mark.parametrize("seed", range(4))
def test_the_codec_reads_and_writes_what_json_does(seed: int) -> None:
    rng = random.Random(seed)
    dumps, loads = wire.json_dumps, wire.json_loads
    assert wire._c_codec() is not None  # this CPython has _json: the fast path is the one tested
    for _ in range(300):
        doc = _document(rng)
        text = dumps(doc)
        assert text == json.dumps(doc, separators=(",", ":"))  # byte for byte the json module's
        assert json.loads(text) == doc
        assert loads(json.dumps(doc, indent=1)) == doc == loads(text)
    nan = loads(dumps({"x": math.nan}))["x"]
    assert math.isnan(nan)


@pytest.mark.parametrize("text", ["", " ", "{", '{"a":1} x', "[1,]", "nul", '"\\x"', "{'a': 1}", '{"a": 1}\x0c',
                                  "1\xa0", "[]\u2028"])
def test_the_codec_rejects_what_json_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        wire.json_loads(text)


def test_the_codec_refuses_what_json_cannot_write() -> None:
    doc = {"a": {1, 2}}
    for _ in range(2):  # the same object again: a TypeError again, not "Circular reference"
        with pytest.raises(TypeError, match="set is not JSON serializable"):
            wire.json_dumps(doc)
    assert wire.json_dumps({"a": [1, 2]}) == '{"a":[1,2]}'
    assert wire.json_loads(' \n{"a": [1, 2]}\n ') == {"a": [1, 2]}


def test_frames_round_trip_through_a_pipe() -> None:
    read_fd, write_fd = os.pipe()
    try:
        body = os.urandom(30_000)  # within the pipe buffer: nothing reads until it is written
        wire.write_all(write_fd, frame(b"D", body) + frame(b"E", b""))
        os.close(write_fd)
        write_fd = -1
        assert wire.read_frame(read_fd) == (b"D", body)
        assert wire.read_frame(read_fd) == (b"E", b"")
        assert wire.read_frame(read_fd) is None  # EOF
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_an_oversized_or_unknown_frame_is_refused() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"D" + (MAX_DATA + 1).to_bytes(4, "big") + b"Q" + (0).to_bytes(4, "big"))
        with pytest.raises(ValueError, match="bad frame"):
            wire.read_frame(read_fd)
        with pytest.raises(ValueError, match="bad frame"):
            wire.read_frame(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_the_agent_loads_none_of_the_costly_modules(tmp_path: Path) -> None:
    # As the target's cache starts it: python -S, the agent's package imported from a folder.
    unpack_agent(tmp_path)
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import opsrunner_agent.server; "
            "from opsrunner_agent import watchdog, wire as agent; "
            "print(watchdog.load_prctl()(36, 1, 0, 0, 0)); "
            "print(' '.join(sorted(set(sys.modules) & {'re', 'json', 'enum', 'signal', 'ctypes', "
            "'threading', 'struct', 'hashlib'})) or '-')\n"
            "for bad in ('{x}', '[1,]', '{\"a\": 1} 2', ''):\n"
            "    try:\n        agent.json_loads(bad)\n    except ValueError as exc:\n        print(type(exc).__name__)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["0", "-"]  # prctl(PR_SET_CHILD_SUBREAPER) through _ctypes worked
    # Malformed input, in a process that has not loaded json: a ValueError, as json.loads gives.
    assert out.split("\n")[2:6] == ["JSONDecodeError"] * 4


def test_one_way_to_write_a_time() -> None:
    # guards.py and diagnose.py each had a _when(), and the later one wrote a missing time as
    # 1970 or now. The one left names it.
    assert jobfiles.when(None) == jobfiles.when(0) == "an unknown time"
