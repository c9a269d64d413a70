"""Alerts sent at once from two threads (opsrunner as a library; a parallel delivery) each
report their own reason: apprise logs every delivery to one process-wide logger, and a
failed one's reason is read from that log. Real listeners on 127.0.0.1: a hook that answers
HTTP 500 after a while, a port that refuses connections, a port that accepts and never
answers."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from opsrunner.schedule.notify import Alert, send


@pytest.fixture
def slow_500() -> Iterator[str]:
    """A hook on 127.0.0.1 that answers every POST with HTTP 500 after 0.5 s: its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(0.5)
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _at_once(first: str, second: str) -> tuple[str | None, str | None]:
    """send() to `first`, and 0.1 s later, from another thread, to `second`: their reasons."""
    found: dict[str, str | None] = {}

    def deliver(name: str, url: str) -> None:
        found[name] = send(url, Alert("t", "b"), attempts=1)

    threads = [threading.Thread(target=deliver, args=("first", first)),
               threading.Thread(target=deliver, args=("second", second))]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for thread in threads:
        thread.join(30)
    return found["first"], found["second"]


def test_two_alerts_at_once_each_say_what_happened_to_them(slow_500: str) -> None:
    level = logging.getLogger("apprise").level
    closed = _closed_port()
    answered, refused = _at_once(slow_500, f"http://127.0.0.1:{closed}/hook")
    assert answered is not None and "error=500" in answered and "refused" not in answered
    assert refused == f"connection refused by 127.0.0.1:{closed} (after 1 attempts)"
    assert logging.getLogger("apprise").level == level  # as it was before


def test_an_alert_that_fails_after_another_ended_still_says_why(slow_500: str) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        answered, unanswered = _at_once(slow_500, f"json://127.0.0.1:{port}/hook?rto=1")
    assert answered is not None and "error=500" in answered
    # its socket error comes after the first alert, begun before it, ended
    assert unanswered == "the hook accepted the connection but sent no answer within 1 s (after 1 attempts)"
