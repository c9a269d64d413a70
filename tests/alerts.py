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
        #: How notes name it: a plain hook's path masked as a token (notify.label).
        self.shown = self.url.removesuffix("/hook") + "/h...k"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()


class Mailbox:
    """An SMTP server on 127.0.0.1 (aiosmtpd) that keeps every message it is sent."""

    def __init__(self) -> None:
        import email
        import email.policy
        import socket

        from aiosmtpd.controller import Controller

        self.messages: list[email.message.EmailMessage] = []
        mailbox = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                mailbox.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
                return "250 OK"

        with socket.socket() as probe:  # a free port (aiosmtpd checks its own readiness by connecting to it)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()
        self.url = f"mailto://127.0.0.1:{self.port}?to=ops@example.com&from=opsrunner@example.com&mode=insecure"

    def texts(self) -> list[str]:
        """Each message's subject and plain-text body."""
        found = []
        for message in self.messages:
            body = message.get_body(preferencelist=("plain",))
            found.append(f"{message['Subject']}\n{body.get_content() if body else ''}")
        return found

    def stop(self) -> None:
        self.controller.stop()
