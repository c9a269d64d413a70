"""A plain http(s) web hook given to --notify is posted to with its query string (the hook's
token, its options), and the run's note names it without the query's values."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.helpers import ProjectEnv

TOKEN = "TOK123-a9f2"


class Hook:
    """An HTTP server on 127.0.0.1 that records the path (with its query) of each POST."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                hook.paths.append(self.path)
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    try:
        yield h
    finally:
        h.server.shutdown()
        h.server.server_close()




def test_a_plain_web_hook_keeps_its_query_and_the_note_masks_it(env: ProjectEnv, hook: Hook) -> None:
    url = f"{hook.base}/hook?token={TOKEN}&team=ml&path=%2Fa%20b"
    added = env.run("schedule", "add", "q", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", url,
                    "--notify-on", "always")
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "q")
    assert res.rc == 0, res.out + res.err
    [path] = hook.paths
    assert path.startswith(f"/hook?token={TOKEN}&team=ml&path=")
    assert parse_qsl(urlsplit(path).query) == [("token", TOKEN), ("team", "ml"), ("path", "/a b")]
    assert hook.bodies[0]["title"] == "opsrunner: schedule q OK (exit 0): site.yml"
    [run] = env.history()
    port = hook.base.rsplit(":", 1)[1]
    assert run["notes"] == [f"alert to http://127.0.0.1:{port}/h...k?token=****&team=****&path=****: sent"]
    assert TOKEN not in res.out + res.err + json.dumps(run)


def test_a_failed_alert_to_a_hook_with_a_query_shows_no_token(env: ProjectEnv, hook: Hook) -> None:
    port = hook.base.rsplit(":", 1)[1]
    hook.server.shutdown()
    hook.server.server_close()  # nothing listens there any more: every attempt fails
    added = env.run("schedule", "add", "q", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify",
                    f"http://127.0.0.1:{port}/hook?token={TOKEN}", "--notify-on", "always")
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "q")
    assert res.rc == 0
    assert f"WARNING: alert to http://127.0.0.1:{port}/h...k?token=****: FAILED: " in res.err
    assert TOKEN not in res.out + res.err + json.dumps(env.history())
