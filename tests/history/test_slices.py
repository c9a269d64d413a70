"""`play --slice I/N`: which hosts a slice runs (pure logic), and what the command line does
with a bad slice, an empty slice and the run group (real `opsrunner play` processes)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from opsrunner.errors import ValidationError
from opsrunner.history.groups import run_group_for
from opsrunner.selection import HostSlice, parse_slice, slice_of
from tests.conftest import write_yaml
from tests.helpers import ProjectEnv

PLAYBOOK = [{"name": "Touch", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "Mark", "shell": "echo {{ inventory_hostname }} >> {{ marks }}"}]}]


def test_slices_cover_every_host_once_whatever_the_inventory_order() -> None:
    hosts = [f"gpu-{i:04d}.dc1" for i in range(1000)]
    for count in (1, 2, 3, 4, 8):
        slices = [HostSlice(i, count) for i in range(1, count + 1)]
        chosen = [[h for h in hosts if s.selects(h)] for s in slices]
        assert sorted(h for part in chosen for h in part) == sorted(hosts)  # each host in exactly one slice
        shuffled = random.Random(count).sample(hosts, len(hosts))
        assert [sorted(h for h in shuffled if s.selects(h)) for s in slices] == [sorted(p) for p in chosen]


def test_slices_are_balanced_enough() -> None:
    """sha256 mod N: at 1000 hosts every slice of 2..16 is within 25% of its fair share
    (measured worst: 16 slices, 48..75 of 62.5); docs/scale-out.md gives the figures."""
    hosts = [f"node{i:04d}" for i in range(1000)]
    for count in (2, 4, 8, 16):
        sizes = Counter(slice_of(h, count) for h in hosts)
        fair = len(hosts) / count
        assert set(sizes) == set(range(1, count + 1))
        assert max(abs(n - fair) for n in sizes.values()) <= 0.25 * fair, (count, sizes)


@pytest.mark.parametrize("text", ["0/4", "5/4", "x/y", "1/0", "3", "-1/4", ""])
def test_a_bad_slice_is_bad_input(text: str) -> None:
    with pytest.raises(ValidationError, match="--slice"):
        parse_slice(text)


def test_the_run_group_default() -> None:
    two = HostSlice(2, 4)
    assert run_group_for("mine", two, "site.yml", {"OPSRUNNER_RUN_GROUP": "env"}) == "mine"
    assert run_group_for(None, None, "site.yml", {"OPSRUNNER_RUN_GROUP": "env"}) == "env"
    assert run_group_for(None, None, "site.yml", {}) is None  # unsliced: no group
    assert run_group_for(None, two, "a/site.yml", {"GITHUB_RUN_ID": "77", "GITHUB_RUN_ATTEMPT": "2"}) == \
        "site-github-77-2"
    assert run_group_for(None, two, "site.yml", {"CI_PIPELINE_ID": "9"}) == "site-gitlab-9"
    assert run_group_for(None, two, "site.yml", {}).startswith("site-4slices-")  # type: ignore[union-attr]


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    env = ProjectEnv(tmp_path)
    write_yaml(env.project / "site.yml", PLAYBOOK)
    write_yaml(env.project / "inv.yml", {"all": {"vars": {"marks": str(tmp_path / "marks")},
                                                "hosts": {"only-one": {"connection": "local"}}}})
    return env


def test_slice_bad_values_exit_4_before_any_host_is_touched(env: ProjectEnv, tmp_path: Path) -> None:
    for text in ("0/4", "5/4", "x/y"):
        res = env.run("play", "site.yml", "-i", "inv.yml", "--slice", text)
        assert res.rc == 4, res.out + res.err
        assert f"command line: --slice {text!r}: " in res.err and "(at --slice)" in res.err, res.err
    assert not (tmp_path / "marks").exists()


def test_slice_that_selects_no_host_succeeds_with_a_clear_line(env: ProjectEnv, tmp_path: Path) -> None:
    empty = next(i for i in (1, 2) if slice_of("only-one", 2) != i)
    res = env.run("play", "site.yml", "-i", "inv.yml", "--slice", f"{empty}/2", "--run-group", "g1")
    assert res.rc == 0, res.out + res.err
    assert f"slice {empty}/2 selects none of the 1 host(s) of this run (the other slices have them): " \
           "nothing to do here" in res.out
    assert not (tmp_path / "marks").exists()
    other = env.run("play", "site.yml", "-i", "inv.yml", "--slice", f"{3 - empty}/2", "--run-group", "g1")
    assert other.rc == 0 and (tmp_path / "marks").read_text().split() == ["only-one"]
    runs = json.loads(env.run("history", "--group", "g1", "--json").out)
    assert sorted(r["slice"] for r in runs) == ["1/2", "2/2"] and [r["exit_code"] for r in runs] == [0, 0]
    nothing = env.run("play", "site.yml", "-i", "inv.yml", "-l", "nosuchhost", "--slice", "1/2")
    assert nothing.rc == 1 and "no hosts to target" in nothing.err  # no host at all is still an error
