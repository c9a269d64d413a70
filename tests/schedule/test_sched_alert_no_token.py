"""A failed alert's reason never quotes a credential of its URL. For most apprise services the
URL's host part is a token (Pushover's app token, Slack's first token): the reason names the
server only for a web hook or an email (their host is a host), other services by their apprise
scheme; a proxy that refused is named as the proxy, not as the service. Only 127.0.0.1 is
contacted: a closed port, or a proxy at a closed port."""

from __future__ import annotations

import json
import socket

import pytest

from opsrunner.schedule.notify import Alert, label, send
from tests.helpers import ProjectEnv

PUSHOVER = "pover://uQiRzpo4DXghDmr9QzzfQu27cmVRsG@azGDORePK8gMaC0QOYAMyEEuzJnyUi"
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"
SECRETS = ("uQiRzpo4DXghDmr9QzzfQu27cmVRsG", "azGDORePK8gMaC0QOYAMyEEuzJnyUi", "T1JJ3T3L2", "A1BRTD4JD",
           "TIiajkdnlazkcOXrIdevi7FQ")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_alert_to_a_token_url_names_the_proxy_and_no_token(env: ProjectEnv) -> None:
    proxy = _closed_port()
    env.vars.update({name: f"http://127.0.0.1:{proxy}" for name in PROXY_VARS} | {"NO_PROXY": "", "no_proxy": ""})
    added = env.run("schedule", "add", "a", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", PUSHOVER,
                    "--notify", SLACK, "--notify-on", "always")
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "a")
    assert res.rc == 0, res.out + res.err  # an alert never fails the run
    [run] = env.history()
    assert run["notes"] == [f"alert to {label(url)}: FAILED: connection refused by the proxy 127.0.0.1:{proxy} "
                            "(after 3 attempts)" for url in (PUSHOVER, SLACK)]
    for note in run["notes"]:
        assert f"WARNING: {note}\n" in res.err
    shown = res.out + res.err + json.dumps(env.history())
    assert [secret for secret in SECRETS if secret in shown] == []


def test_a_service_whose_host_may_be_a_token_is_named_by_its_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    port = _closed_port()
    # Gotify's host is a server, but apprise's host part of most services is a token: none named
    assert send(f"gotify://127.0.0.1:{port}/AbCdEfGhIjKlMn0", Alert("t", "b"), attempts=1) == \
        "connection refused (apprise service gotify) (after 1 attempts)"
    # a web hook's and an email's server are named, as before
    assert send(f"json://127.0.0.1:{port}/hook?-token=AbCdEf", Alert("t", "b"), attempts=1) == \
        f"connection refused by 127.0.0.1:{port} (after 1 attempts)"
    assert send(f"mailto://127.0.0.1:{port}?to=ops@example.com&from=o@example.com&mode=insecure", Alert("t", "b"),
                attempts=1) == f"connection refused by 127.0.0.1:{port} (after 1 attempts)"
