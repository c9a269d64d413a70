"""`schedule add` checks the playbook with the schedule's --limit, as its runs will apply it
(a limit that leaves no host is refused, exit 4, nothing installed); `opsrunner check` takes
play's selection options (-l, -t, --skip-tags); units written to a custom unit directory are
said to be not activated."""

from __future__ import annotations

from tests.conftest import write_yaml
from tests.helpers import ProjectEnv


def test_add_refuses_a_limit_that_leaves_no_host(env: ProjectEnv) -> None:
    res = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "-l", "typo", "--at", "daily")
    assert res.rc == 4, res.out + res.err
    assert ("ERROR: <--limit>: host pattern 'all' and --limit 'typo' leave no hosts to target in 1 inventory "
            "hosts (at --limit)") in res.err
    assert "schedule 'nightly' not added" in res.err
    assert not (env.root / "schedules").exists() and not (env.root / "units").exists()
    ok = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "-l", "node1", "--at", "daily")
    assert ok.rc == 0, ok.err


def test_check_takes_the_selection_options_of_play(env: ProjectEnv) -> None:
    write_yaml(env.project / "tagged.yml", [{"hosts": "all", "tasks": [
        {"name": "a", "debug": {"msg": "a"}, "tags": ["one"]}, {"name": "b", "debug": {"msg": "b"}}]}])
    res = env.run("check", "tagged.yml", "-i", "inv.yml", "-l", "node1", "-t", "one", "--skip-tags", "two",
                  "-e", "x=1")
    assert res.rc == 0, res.err
    assert "OK (1 plays, 2 tasks" in res.out
    res = env.run("check", "tagged.yml", "-i", "inv.yml", "-l", "typo")
    assert res.rc == 4 and "<--limit>: host pattern 'all' and --limit 'typo' leave no hosts" in res.err, res.err


def test_add_to_a_unit_directory_says_nothing_is_activated(env: ProjectEnv) -> None:
    res = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily")
    assert res.rc == 0, res.err
    first = res.out.splitlines()[0]
    assert first.startswith("schedule nightly: site.yml at 'daily', written, not activated (custom unit directory): "
                            "nothing runs it until its timer is enabled, then next run "), first
