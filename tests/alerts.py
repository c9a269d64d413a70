"""An alert receiver for tests: an HTTP server on 127.0.0.1 that records what is POSTed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Alerts:
    """An HTTP server on 127.0.0.1 that records POSTed JSON and answers with scripted codes."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []  # as sent, before any JSON decoding
        self.codes: list[int] = []
        alerts = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                alerts.bodies.append(body)
                alerts.received.append(json.loads(body))
                self.send_response(alerts.codes.pop(0) if alerts.codes else 200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
