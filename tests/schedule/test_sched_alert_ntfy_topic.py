"""An ntfy URL's topic is its secret (whoever knows a public topic reads it and posts to it):
the run's notes (`opsrunner show`, the history) and the delivery-failure warnings name the
URL with each topic masked as apprise masks a token (`T...A`), in every form apprise takes
for ntfy, still naming the service and the host (ntfy.sh for its cloud forms). Only 127.0.0.1
is contacted: the alert receiver, and a closed port as the proxy of the ntfy.sh forms."""

from __future__ import annotations

import json
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor

from tests.alerts import Alerts
from tests.helpers import ProjectEnv

TOPICS = ("TopicAlpha7q2", "TopicBravo9x4", "TopicCharlie3k", "TopicDelta5m8")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_ntfy_topics_are_masked_in_the_notes_and_warnings(env: ProjectEnv, alerts: Alerts) -> None:
    at = alerts.url.removeprefix("http://").removesuffix("/hook")  # 127.0.0.1:PORT
    proxy = _closed_port()
    env.vars.update({name: f"http://127.0.0.1:{proxy}" for name in PROXY_VARS})  # ntfy.sh is never reached
    schedules = {"own": [f"ntfy://{at}/{TOPICS[0]}", f"ntfy://ops:pw-s3cr3t@{at}/{TOPICS[1]}"],
                 "cloud": [f"https://ntfy.sh/{TOPICS[2]}"], "bare": [f"ntfy://{TOPICS[3]}"]}
    alerts.codes = [500, 500, 500]  # the first URL's three attempts: ntfy's own failure message names the topic
    for name, urls in schedules.items():  # a playbook each: their runs go on at once (the run lock)
        shutil.copy(env.project / "site.yml", env.project / f"{name}.yml")
        added = env.run("schedule", "add", name, f"{name}.yml", "-i", "inv.yml", "--at", "daily", "--notify-on",
                        "always", *[arg for url in urls for arg in ("--notify", url)])
        assert added.rc == 0, added.err
    # at once: apprise waits 5.5 s between two requests of one ntfy URL, whose failed alert is tried 3 times
    with ThreadPoolExecutor(len(schedules)) as pool:
        results = dict(zip(schedules, pool.map(lambda name: env.run("schedule", "run", name), schedules),
                           strict=True))
    runs = {run["schedule"]: run for run in env.history()}
    refused = f"FAILED: connection refused by the proxy 127.0.0.1:{proxy} (after 3 attempts)"
    assert runs["own"]["notes"][0].startswith(f"alert to ntfy://{at}/T...2: FAILED: "), runs["own"]
    assert "Failed to send ntfy notification to topic 'T...2': " in runs["own"]["notes"][0], runs["own"]
    assert runs["own"]["notes"][1:] == [f"alert to ntfy://ops:****@{at}/T...4: sent"], runs["own"]
    assert runs["cloud"]["notes"] == [f"alert to ntfys://ntfy.sh/T...k: {refused}"], runs["cloud"]
    assert runs["bare"]["notes"] == [f"alert to ntfys://ntfy.sh/T...8: {refused}"], runs["bare"]
    everything = json.dumps(env.history())
    for name, res in results.items():
        assert res.rc == 0, res.out + res.err
        shown = env.run("show", runs[name]["id"])
        assert shown.rc == 0, shown.err
        for note in runs[name]["notes"]:
            assert note in shown.out, shown.out
            assert (f"WARNING: {note}\n" in res.err) == ("FAILED" in note), res.err
        everything += res.out + res.err + shown.out
    assert [t for t in (*TOPICS, "pw-s3cr3t") if t in everything] == [], everything
    assert len(alerts.bodies) == 4  # the first URL's three attempts, then the second's alert
