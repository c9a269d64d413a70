"""A term of a play's own `hosts:` that matches no host or group of the inventory is warned
about as ansible-core does ("Could not match supplied host pattern, ignoring: TERM"), once
per play, naming the play and where its `hosts:` is written; the play runs on what the other
terms match. A play whose whole pattern matches nothing is skipped (or the run refused) as
before, with no warning besides. Every host is a local one in the test's tmp dir; a host
that ran anything leaves a file named after it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_yaml
from tests.helpers import CliResult, ProjectEnv

TOUCH = {"name": "touch", "command": "touch {{ out }}/{{ inventory_hostname }}"}
WARNING = "[WARNING]: Could not match supplied host pattern, ignoring: "


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    local = {"connection": "local"}
    write_yaml(e.project / "inv.yml", {"all": {
        "hosts": {"h1": local}, "vars": {"out": str(e.root / "out")},
        "children": {"web": {"hosts": {"h2": local}}, "db": {"hosts": {"h3": local}}, "empty": {}}}})
    (e.root / "out").mkdir()
    return e


def touched(env: ProjectEnv) -> list[str]:
    return sorted(p.name for p in (env.root / "out").iterdir())


def playbook(env: ProjectEnv, *plays: tuple[str, Any]) -> Path:
    """`plays`: (name, hosts) pairs; every play touches its hosts' files."""
    return write_yaml(env.project / "pb.yml", [{"name": name, "hosts": hosts, "gather_facts": False,
                                               "tasks": [dict(TOUCH)]} for name, hosts in plays])


def warnings(res: CliResult) -> list[str]:
    return [line for line in res.err.splitlines() if line.startswith(WARNING)]


def play(env: ProjectEnv, *args: str) -> CliResult:
    return env.run("play", "pb.yml", "-i", "inv.yml", *args)


@pytest.mark.parametrize("hosts", ["web:nosuch", "web,nosuch", ["web", "nosuch"], "nosuch:web:nosuch"])
def test_a_hosts_term_that_matches_nothing_is_warned_about_once_and_ignored(env: ProjectEnv, hosts: Any) -> None:
    playbook(env, ("deploy web", hosts))
    res = play(env)
    assert res.rc == 0, res.out + res.err
    assert touched(env) == ["h2"]
    pattern = hosts if isinstance(hosts, str) else ",".join(hosts)
    assert warnings(res) == [f"{WARNING}nosuch (in hosts {pattern!r} of play 'deploy web' at pb.yml:2:3)"], res.err


def test_each_play_names_its_own_unmatched_terms(env: ProjectEnv) -> None:
    playbook(env, ("first", "web:webz"), ("second", "db:webz:dbz"), ("third", "all"))
    res = play(env)
    assert res.rc == 0, res.out + res.err
    assert warnings(res) == [
        f"{WARNING}webz (in hosts 'web:webz' of play 'first' at pb.yml:2:3)",
        f"{WARNING}webz (in hosts 'db:webz:dbz' of play 'second' at pb.yml:8:3)",
        f"{WARNING}dbz (in hosts 'db:webz:dbz' of play 'second' at pb.yml:8:3)",
    ], res.err
    assert touched(env) == ["h1", "h2", "h3"]


@pytest.mark.parametrize(("hosts", "unmatched", "ran"), [
    ("web:nosuch*", "nosuch*", ["h2"]),                 # a glob that matches nothing
    ("web:~nosuch.*", "~nosuch.*", ["h2"]),             # a regex that matches nothing
    ("all:!nosuch", "nosuch", ["h1", "h2", "h3"]),      # ansible-core warns for the excluded term too
    ("web:db:&nosuch", None, []),                       # the whole pattern matches nothing: skipped
    ("web:!db", None, ["h2"]),                          # db is a group: excluding none of web is no mistake
    ("web:empty", None, ["h2"]),                        # an empty group is a group: ansible-core is silent
    ("web:h*", None, ["h1", "h2", "h3"]),
    ("web:~h[13]", None, ["h1", "h2", "h3"]),
    ("*", None, ["h1", "h2", "h3"]),
    ("all:!web", None, ["h1", "h3"]),
])
def test_patterns_warn_only_for_terms_that_name_nothing(env: ProjectEnv, hosts: str, unmatched: str | None,
                                                       ran: list[str]) -> None:
    playbook(env, ("p", hosts), ("other", "h1"))
    res = play(env)
    assert res.rc == 0, res.out + res.err
    expected = [f"{WARNING}{unmatched} (in hosts {hosts!r} of play 'p' at pb.yml:2:3)"] if unmatched else []
    assert warnings(res) == expected, res.err
    assert touched(env) == sorted({*ran, "h1"})


def test_a_play_whose_whole_pattern_matches_nothing_is_skipped_as_before(env: ProjectEnv) -> None:
    playbook(env, ("typo", "webz:dbz"), ("good", "web"))
    res = play(env)
    assert res.rc == 0, res.out + res.err
    assert "skipping play 'typo': no hosts matched" in res.out + res.err
    assert warnings(res) == [] and touched(env) == ["h2"]
    playbook(env, ("typo", "webz:dbz"))
    res = play(env)
    assert res.rc == 1 and warnings(res) == [], res.err
    assert "host pattern 'webz:dbz' leaves no hosts to target" in res.err


def test_check_syntax_check_and_list_hosts_warn_too_and_touch_nothing(env: ProjectEnv) -> None:
    playbook(env, ("deploy web", "web:nosuch"))
    expected = [f"{WARNING}nosuch (in hosts 'web:nosuch' of play 'deploy web' at pb.yml:2:3)"]
    for args in (("check", "pb.yml", "-i", "inv.yml"), ("play", "pb.yml", "-i", "inv.yml", "--syntax-check"),
                 ("play", "pb.yml", "-i", "inv.yml", "--list-hosts")):
        res = env.run(*args)
        assert res.rc == 0, res.out + res.err
        assert warnings(res) == expected, (args, res.err)
    assert touched(env) == []


def test_a_limit_does_not_hide_a_hosts_term_that_matches_nothing(env: ProjectEnv) -> None:
    """The play's pattern is the play's, whatever this run's --limit: its mistake is told."""
    playbook(env, ("deploy web", "web:nosuch"), ("db", "db"))
    res = play(env, "-l", "db")
    assert res.rc == 0, res.out + res.err
    assert warnings(res) == [f"{WARNING}nosuch (in hosts 'web:nosuch' of play 'deploy web' at pb.yml:2:3)"]
    assert touched(env) == ["h3"]


def test_a_hosts_term_from_e_that_matches_nothing_is_warned_about(env: ProjectEnv) -> None:
    playbook(env, ("deploy", "web:{{ extra }}"))
    res = play(env, "-e", "extra=nosuch")
    assert res.rc == 0, res.out + res.err
    assert warnings(res) == [f"{WARNING}nosuch (in hosts 'web:nosuch' of play 'deploy' at pb.yml:2:3)"], res.err
    assert touched(env) == ["h2"]


def test_a_limit_naming_an_empty_group_is_no_mistake(env: ProjectEnv) -> None:
    """As in ansible-core, the --limit terms follow the same rule: an empty group is a group."""
    playbook(env, ("all", "all"))
    res = play(env, "-l", "h1:empty:nosuch")
    assert res.rc == 0, res.out + res.err
    assert warnings(res) == [f"{WARNING}nosuch (in --limit 'h1:empty:nosuch')"], res.err
    assert touched(env) == ["h1"]
