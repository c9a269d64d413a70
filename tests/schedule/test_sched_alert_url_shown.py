"""A run's alert note names the URL the user gave --notify: a plain http(s) web hook as its
http(s) URL (credentials and query values masked), not as the json:// URL apprise posts it
through; an apprise URL as apprise shows it."""

from __future__ import annotations

from tests.alerts import Alerts
from tests.helpers import ProjectEnv


def test_the_note_of_a_plain_http_hook_names_it_as_given(env: ProjectEnv, alerts: Alerts) -> None:
    assert alerts.url.startswith("http://127.0.0.1:")
    assert env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", alerts.url,
                   "--notify-on", "always").rc == 0
    assert env.run("schedule", "run", "n").rc == 0
    [run] = env.history()
    assert run["notes"] == [f"alert to {alerts.shown}: sent"]
    assert len(alerts.received) == 1  # still posted as JSON, through apprise's json://


def test_credentials_of_a_plain_hook_stay_masked(env: ProjectEnv, alerts: Alerts) -> None:
    url = alerts.url.replace("http://", "http://ops:s3cr3t-pw@") + "?token=t0k3n"
    assert env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", url,
                   "--notify-on", "always").rc == 0
    res = env.run("schedule", "run", "n")
    assert res.rc == 0
    [run] = env.history()
    shown = alerts.shown.replace("http://", "http://ops:****@") + "?token=****"
    assert run["notes"] == [f"alert to {shown}: sent"]
    assert "s3cr3t-pw" not in str(run) + res.out + res.err and "t0k3n" not in str(run) + res.out + res.err


def test_an_apprise_json_url_is_shown_as_json(env: ProjectEnv, alerts: Alerts) -> None:
    url = alerts.url.replace("http://", "json://")
    assert env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", url,
                   "--notify-on", "always").rc == 0
    assert env.run("schedule", "run", "n").rc == 0
    assert env.history()[0]["notes"] == [f"alert to {url}: sent"]


def test_the_path_of_a_plain_hook_is_masked(env: ProjectEnv, alerts: Alerts) -> None:
    """A plain hook's path often is its credential (Slack and Mattermost style, a self-hosted
    ntfy's topic): each segment is masked as a token, its scheme, host and port kept."""
    base = alerts.url.removesuffix("/hook")
    url = f"{base}/services/T0SECRET1/B0SECRET2/xyzSECRET3"
    assert env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", url,
                   "--notify-on", "always").rc == 0
    res = env.run("schedule", "run", "n")
    assert res.rc == 0, res.err
    [run] = env.history()
    assert run["notes"] == [f"alert to {base}/s...s/T...1/B...2/x...3: sent"], run["notes"]
    assert len(alerts.received) == 1
    assert "SECRET" not in str(run) + res.out + res.err


def test_a_rejected_url_is_named_masked(env: ProjectEnv) -> None:
    """`schedule add` refusing a URL apprise cannot use names it masked, as a run's notes do."""
    res = env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify",
                  "slack://T0SECRET1/B0SECRET2")
    assert res.rc == 4, res.err
    assert "'slack://T...1/B...2': " in res.err, res.err
    assert "SECRET" not in res.out + res.err, res.err
