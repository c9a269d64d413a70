"""An alert that cannot be delivered says what happened to it, in the run's output (the
journal, under a timer) and in its history record, not apprise's `A Connection error
occurred` for every kind of failure: a hook that accepted the connection and never
answered, a port where nothing listens, a hook that answered HTTP 500. Each against a real
listener on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.alerts import Alerts
from tests.helpers import ProjectEnv


@pytest.fixture
def silent() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


def _failed_alert(env: ProjectEnv, url: str) -> tuple[str, str]:
    """Run a schedule that alerts `url` whatever the outcome: (its stderr, its one run note)."""
    added = env.run("schedule", "add", "a", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", url,
                    "--notify-on", "always")
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "a")
    assert res.rc == 0, res.out + res.err  # the play's code: an alert never fails the run
    [run] = env.history()
    [note] = run["notes"]
    assert f"WARNING: {note}\n" in res.err
    return res.err, note


def test_a_hook_that_accepts_and_never_answers_is_said_to_be_silent(env: ProjectEnv, silent: int) -> None:
    # apprise's own read timeout option (rto), short: its default is 4 s an attempt
    _, note = _failed_alert(env, f"json://127.0.0.1:{silent}/hook?rto=0.3")
    assert note == (f"alert to json://127.0.0.1:{silent}/hook: FAILED: the hook accepted the connection but sent "
                    "no answer within 0.3 s (after 3 attempts)")


def test_a_hook_that_refuses_the_connection_is_said_to_refuse_it(env: ProjectEnv) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _, note = _failed_alert(env, f"http://127.0.0.1:{port}/hook")
    assert note == f"alert to http://127.0.0.1:{port}/h...k: FAILED: connection refused by 127.0.0.1:{port} " \
        "(after 3 attempts)"


def test_a_hook_that_answers_500_is_said_to_answer_500(env: ProjectEnv, alerts: Alerts) -> None:
    alerts.codes = [500, 500, 500]
    _, note = _failed_alert(env, alerts.url)
    assert len(alerts.received) == 3
    assert note.startswith(f"alert to {alerts.shown}: FAILED: ") and note.endswith(" (after 3 attempts)")
    assert "error=500" in note and "Internal server error" in note and "Connection error" not in note
