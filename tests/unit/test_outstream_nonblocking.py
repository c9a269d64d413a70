"""A non-blocking output whose reader takes nothing: the write waits a bounded time, then
the output is told as lost from then on, and the command goes on."""

from __future__ import annotations

import os
import threading
import time

import pytest

from opsrunner import outstream
from opsrunner.outstream import QuietWhenClosed


def test_an_output_that_stays_full_is_told_as_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outstream, "WRITE_WAIT_S", 0.2)
    r, w = os.pipe()
    os.set_blocking(w, False)
    with open(w, "w", encoding="utf-8") as raw:
        out = QuietWhenClosed(raw)
        assert out.write("x" * 300_000) == 300_000  # more than the pipe holds; nobody reads
        assert out.lost is not None and out.lost.endswith(": its reader took none of it for 0.2 s"), out.lost
        assert not out.reader_gone and out.lost_to_the_end
    os.close(r)


def test_what_the_encoding_cannot_hold_is_written_escaped() -> None:
    """A lone surrogate (a string no UTF-8 can hold) broke the output: exit 250 after tasks ran."""
    r, w = os.pipe()
    with open(w, "w", encoding="utf-8") as raw:
        out = QuietWhenClosed(raw)
        out.write("a\ud800b\n")
        out.write("c\n")
    with open(r, "rb") as got:
        assert got.read() == b"a\\ud800b\nc\n"
    assert out.lost is None


def test_two_threads_writing_at_once_never_interleave_within_a_write() -> None:
    """Host threads write to the same stream: a write longer than a pipe takes at once went
    out in pieces, and another thread's write could land between them."""
    r, w = os.pipe()
    got = bytearray()

    def read_slowly() -> None:
        while chunk := os.read(r, 4096):
            got.extend(chunk)
            time.sleep(0.0005)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    with open(w, "w", encoding="utf-8") as raw:
        out = QuietWhenClosed(raw)
        writers = [threading.Thread(target=out.write, args=(c * 300_000,)) for c in "ab"]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
    reader.join()
    os.close(r)
    assert bytes(got) in (b"a" * 300_000 + b"b" * 300_000, b"b" * 300_000 + b"a" * 300_000)
