"""Alerts through apprise, against real local receivers: an HTTP server taking json://
(tests/alerts.py's Alerts) and an SMTP server taking mailto:// (its Mailbox). URLs are
checked at `schedule add`; the text carries what failed where, the diagnosis and the log's
last lines, the run id and the dashboard link; failure, recovery and always; a delivery
that fails is recorded and never fails the run."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.alerts import Alerts, Mailbox
from tests.conftest import ROOT, kill_marked, write_yaml
from tests.helpers import CliResult, cli_subprocess


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "proj"
        self.flag = root / "broken"
        self.vars = {"OPSRUNNER_SCHEDULES": str(root / "schedules"), "OPSRUNNER_UNIT_DIR": str(root / "units"),
                     "OPSRUNNER_HISTORY": str(root / "history.db"), "XDG_STATE_HOME": str(root / "state"),
                     "HOME": str(root / "home"), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        (root / "home").mkdir()
        write_yaml(self.project / "site.yml", [{"name": "Flaky", "hosts": "all", "tasks": [
            {"name": "Healthy unless flagged", "shell": f"test ! -e {self.flag}"}]}])
        write_yaml(self.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})

    def run(self, *args: str, cwd: Path | None = None) -> CliResult:
        return cli_subprocess(*args, cwd=cwd or self.project, env=self.vars, timeout=240)

    def history(self) -> list[dict[str, object]]:
        return list(json.loads(self.run("history", "--json").out))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    kill_marked(str(tmp_path / "home"))  # the demo trainer, if one still runs


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox()
    try:
        yield box
    finally:
        box.stop()


def test_a_bad_notify_url_is_exit_4_with_the_reason(env: Env) -> None:
    res = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "daily",
                  "--notify", "nonsense", "--notify", "slack://bad", "--notify", "json://127.0.0.1:9/ok")
    assert res.rc == 4, res.err
    # named masked, as a token (a URL's path, or a text that is no URL, may be a credential)
    assert "ERROR: <--notify>: 'n...e': Unsupported URL: n...e (at --notify)" in res.err
    assert "ERROR: <--notify>: 'slack://b...d': " in res.err and "Slack" in res.err
    assert "json://127.0.0.1:9/ok" not in res.err and "2 error(s)" in res.err
    assert not (env.root / "schedules").exists() and not (env.root / "units").exists()


def test_a_failure_alert_carries_the_diagnosis_the_log_tail_the_run_id_and_the_link(env: Env,
                                                                                     alerts: Alerts) -> None:
    hook = alerts.url.replace("http://", "json://")
    added = env.run("schedule", "add", "nightly", "restart_training.yml", "-e", "train_extra_args=--crash-after=2",
                    "--at", "daily", "--notify", hook, "--dashboard", "http://127.0.0.1:8765/", cwd=ROOT)
    assert added.rc == 0, added.err
    res = env.run("schedule", "run", "nightly")
    assert res.rc == 2, res.out + res.err
    [run] = env.history()
    [alert] = alerts.received
    assert alert["title"] == "opsrunner: schedule nightly FAILED (exit 2): restart_training.yml"
    lines = alert["message"].splitlines()
    failed = next(i for i, ln in enumerate(lines) if ln.startswith("- [localhost] Verify the run is up"))
    assert re.fullmatch(r"  diagnosis: the job \(pid \d+\) exited with code 1\b.*", lines[failed + 1]), lines
    assert lines[failed + 2] == "  last log lines:"
    tail = lines[failed + 3:failed + 8]
    assert all(ln.startswith("    ") for ln in tail) and not lines[failed + 8].startswith("    ")
    assert "RuntimeError: simulated crash" in "\n".join(tail)
    assert lines[-2:] == [f"run {run['id']}: opsrunner show {run['id']}",
                          f"dashboard: http://127.0.0.1:8765/runs/{run['id']}"]


def test_mail_on_failure_and_on_recovery_only(env: Env, mailbox: Mailbox) -> None:
    assert env.run("schedule", "add", "flaky", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", mailbox.url,
                   "--notify-on", "recovery").rc == 0
    env.flag.touch()
    assert env.run("schedule", "run", "flaky").rc == 2
    assert env.run("schedule", "run", "flaky").rc == 2
    env.flag.unlink()
    assert env.run("schedule", "run", "flaky").rc == 0
    assert env.run("schedule", "run", "flaky").rc == 0  # a second success: nothing to say
    texts = mailbox.texts()
    assert [t.splitlines()[0] for t in texts] == [
        "opsrunner: schedule flaky FAILED (exit 2): site.yml", "opsrunner: schedule flaky FAILED (exit 2): site.yml",
        "opsrunner: schedule flaky RECOVERED (exit 0): site.yml"]
    assert "- [node1] Healthy unless flagged: " in texts[0]
    runs = env.history()
    assert [r["notes"] for r in runs] == [[], [f"alert to {_mail_label(mailbox)}: sent"]] + \
        [[f"alert to {_mail_label(mailbox)}: sent"]] * 2
    assert f"run {runs[1]['id']}: opsrunner show {runs[1]['id']}" in texts[2]


def _mail_label(mailbox: Mailbox) -> str:
    return f"mailto://127.0.0.1:{mailbox.port}/ops%40example.com"


def test_an_alert_that_cannot_be_delivered_is_recorded_and_never_fails_the_run(env: Env) -> None:
    closed = "mailto://127.0.0.1:1?to=ops@example.com&from=opsrunner@example.com&mode=insecure"
    assert env.run("schedule", "add", "lost", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", closed,
                   "--notify-on", "always").rc == 0
    res = env.run("schedule", "run", "lost")
    assert res.rc == 0, res.err  # the play's code, not the alert's
    [run] = env.history()
    [note] = run["notes"]  # type: ignore[misc]
    assert note.startswith("alert to mailto://127.0.0.1:1/ops%40example.com: FAILED: ") and "(after 3 attempts)" in note
    assert f"WARNING: {note}" in res.err
