"""No silent no-ops: nothing to target is an error (ansible-core's exit code 1), and the
project's default inventory and playbooks/ are found from any subdirectory."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, write_inventory, write_yaml
from tests.helpers import cli, cli_subprocess

PLAY = [{"hosts": "all", "tasks": [{"name": "hello", "debug": {"msg": "hello from {{ inventory_hostname }}"}}]}]


def _project(tmp_path: Path, marker: bool) -> Path:
    proj = tmp_path / "proj"
    for sub in ("inventory", "deep/er"):
        (proj / sub).mkdir(parents=True)
    if marker:
        write_yaml(proj / "opsrunner.cfg", "# marks the project root\n")
    local = {"connection": "local"}
    write_inventory(proj / "inventory" / "hosts.yml", {"alpha": local, "beta": local})
    write_yaml(proj / "playbooks" / "hello.yml", PLAY)
    return proj


def test_empty_limit_is_an_error_with_ansibles_exit_code(tmp_path: Path) -> None:
    proj = _project(tmp_path, marker=False)
    res = cli("play", "hello.yml", "-l", "typo", cwd=proj)
    assert res.rc == 1
    assert res.err == ("ERROR: host pattern 'all' and --limit 'typo' leave no hosts to target in 2 inventory "
                       "hosts; nothing was run\n")
    assert "PLAY" not in res.out


def test_play_pattern_matching_nothing_is_an_error(tmp_path: Path) -> None:
    proj = _project(tmp_path, marker=False)
    write_yaml(proj / "playbooks" / "typo.yml", [dict(PLAY[0], hosts="trainer")])
    res = cli("play", "typo.yml", cwd=proj)
    assert (res.rc, res.err) == (1, "ERROR: host pattern 'trainer' leaves no hosts to target in 2 inventory hosts; "
                                    "nothing was run\n")
    listed = cli("play", "typo.yml", "--list-hosts", cwd=proj)
    assert listed.rc == 1
    # One empty play among others is skipped with a note, as in Ansible.
    write_yaml(proj / "playbooks" / "mixed.yml", [dict(PLAY[0], hosts="trainer"), PLAY[0]])
    mixed = cli("play", "mixed.yml", cwd=proj)
    assert mixed.rc == 0 and "skipping play" in mixed.out and "hello from alpha" in mixed.out


def test_outside_any_project_the_error_says_no_inventory_was_read(tmp_path: Path) -> None:
    """Run from a folder with no project above it, a playbook's group matches nothing in the
    implicit localhost: the error says no inventory was read (not only that the pattern
    matched nothing, which reads as a typo in the group's name)."""
    proj = _project(tmp_path, marker=False)
    write_yaml(proj / "playbooks" / "group.yml", [dict(PLAY[0], hosts="trainers")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = cli("play", str(proj / "playbooks" / "group.yml"), cwd=elsewhere)
    assert (res.rc, res.err) == (1, "ERROR: host pattern 'trainers' leaves no hosts to target in 1 inventory hosts "
                                    "(no inventory was read: none given with -i, and no inventory/hosts.yml in the "
                                    "working directory or a project folder above it; only the implicit localhost); "
                                    "nothing was run\n")


def test_a_pattern_that_names_a_group_almost_is_asked_about(tmp_path: Path) -> None:
    """`hosts: alpah`, `alpah:bta`: nothing matches, and the group or host named almost so is
    offered, as the module names are."""
    proj = _project(tmp_path, marker=False)
    write_yaml(proj / "playbooks" / "typo.yml", [dict(PLAY[0], hosts="alpah")])
    res = cli("play", "typo.yml", cwd=proj)
    assert (res.rc, res.err) == (1, "ERROR: host pattern 'alpah' leaves no hosts to target in 2 inventory hosts "
                                    "(did you mean 'alpha'?); nothing was run\n")
    write_yaml(proj / "playbooks" / "two.yml", [dict(PLAY[0], hosts="alpah:bta")])
    both = cli("play", "two.yml", cwd=proj)
    assert both.err == ("ERROR: host pattern 'alpah:bta' leaves no hosts to target in 2 inventory "
                        "hosts (did you mean 'alpha' for 'alpah', 'beta' for 'bta'?); nothing was run\n")
    # with the limit named almost so too: the names that would give the run its hosts together
    limited = cli("play", "typo.yml", "-l", "alpah", cwd=proj)
    assert "(did you mean 'alpha'?)" in limited.err, limited.err


def test_a_name_that_would_still_target_nothing_is_not_offered(tmp_path: Path) -> None:
    """An empty group named almost so, a host the play's pattern leaves out, a term the pattern
    excludes: no answer, so not offered; nor one of two names as close. A templated pattern is
    judged as rendered."""
    local = {"connection": "local"}
    inv = write_inventory(tmp_path / "inv.yml", {"gpu1": local, "gpu2": local, "db1": local},
                          groups={"trainers": ["gpu1", "gpu2"], "databases": ["db1"], "standby": []})
    for hosts, args, suggested in [("standbi", [], None), ("databases", ["-l", "gpu3"], None),
                                   ("trainers:&databasez", [], None), ("{{ grp }}", ["-e", "grp=trainerz"], "trainers"),
                                   ("trainers", ["-l", "gpu3"], None),  # gpu1 or gpu2: a guess
                                   ("trainers", ["-l", "gpu1x"], "gpu1")]:
        pb = write_yaml(tmp_path / "pb.yml", [dict(PLAY[0], hosts=hosts)])
        res = cli("play", str(pb), "-i", str(inv), *args, cwd=tmp_path)
        assert res.rc == 1, res.err
        assert ("did you mean" in res.err) == (suggested is not None), (hosts, args, res.err)
        assert suggested is None or f"(did you mean {suggested!r}?)" in res.err, res.err


def test_default_inventory_and_playbooks_found_from_a_subdirectory(tmp_path: Path) -> None:
    for marker in (False, True):
        proj = _project(tmp_path / str(marker), marker=marker)
        top = cli("play", "hello.yml", cwd=proj)
        deep = cli("play", "hello.yml", cwd=proj / "deep" / "er")
        assert top.rc == deep.rc == 0
        assert "hello from alpha" in deep.out and "hello from beta" in deep.out
        assert top.out.count("ok: [") == deep.out.count("ok: [") == 2


def test_shipped_project_status_from_the_role_directory() -> None:
    res = cli_subprocess("play", "status.yml", "--list-hosts", cwd=ROOT / "roles" / "training_restart")
    assert res.rc == 0, res.err
    assert "HOSTS (1):\n    localhost" in res.out
