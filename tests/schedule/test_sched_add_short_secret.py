"""An alert URL's short token (a path segment, a host that is no host) is hidden whole (`…`),
never shown as its first and last character, which would add what it lacks (`x` as `x...x`);
and `schedule add` stopped by bad input ends saying what it did not do for that command
(`schedule 'x' not added: nothing was installed.`), whatever the input at fault: an
argument, a variable, the playbook."""

from __future__ import annotations

from tests.alerts import Alerts
from tests.helpers import ProjectEnv


def test_a_short_token_of_a_rejected_url_is_hidden_without_added_text(env: ProjectEnv) -> None:
    res = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", "bogus://x")
    assert res.rc == 4, res.err
    assert res.err == ("ERROR: <--notify>: 'bogus://…': Unparseable URL bogus://… (at --notify)\n"
                       "1 error(s); schedule 'x' not added: nothing was installed.\n"), res.err
    assert not (env.root / "schedules").exists()


def test_a_short_path_segment_of_a_hook_is_hidden_in_the_runs_notes(env: ProjectEnv, alerts: Alerts) -> None:
    base = alerts.url.removesuffix("/hook")
    assert env.run("schedule", "add", "n", "site.yml", "-i", "inv.yml", "--at", "daily", "--notify", f"{base}/h",
                   "--notify-on", "always").rc == 0
    assert env.run("schedule", "run", "n").rc == 0
    assert env.history()[0]["notes"] == [f"alert to {base}/…: sent"]


def test_schedule_add_ends_with_what_it_did_not_do_for_any_bad_input(env: ProjectEnv) -> None:
    bad_at = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "61 * * * *")
    bad_var = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "daily", "-e", "@missing.yml")
    bad_playbook = env.run("schedule", "add", "x", "missing.yml", "-i", "inv.yml", "--at", "daily")
    for res, at_fault in ((bad_at, "ERROR: <--at>: bad cron expression '61 * * * *': "),
                          (bad_var, "ERROR: missing.yml: cannot read file: "),
                          (bad_playbook, "ERROR: missing.yml: playbook not found ")):
        first, last = res.err.splitlines()
        assert res.rc == 4 and first.startswith(at_fault), res.err
        assert last == "1 error(s); schedule 'x' not added: nothing was installed.", res.err
    assert not (env.root / "schedules").exists()
