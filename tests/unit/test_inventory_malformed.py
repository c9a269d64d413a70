"""Malformed inventories through the CLI: exit 4 with FILE:LINE and the key, before any host
is touched; and `group_names` in ansible-core's order.

The expectations were compared by hand with ansible-core 2.19 (`ansible-inventory`,
`ansible-playbook`) on the same files; the suite does not need it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import cli


def _play(tmp_path: Path, inventory: Path) -> tuple[int, str, Path]:
    """Run a play on every host that would touch a file; (exit code, stderr, that file)."""
    touched = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "gather_facts": False,
                                           "tasks": [{"command": f"touch {touched}"}]}])
    res = cli("play", str(pb), "-i", str(inventory), cwd=tmp_path)
    return res.rc, res.err, touched


# -- INI section headers ------------------------------------------------------------------------
@pytest.mark.parametrize(("header", "reason"), [
    ("[web", "no closing ']'"),
    ("[web:children", "no closing ']'"),
    ("[web:vars", "no closing ']'"),
    ("[web]junk", "text after ']'"),
    ("[web:vars]x", "text after ']'"),
    ("[web:children]junk", "text after ']'"),
    ("[web] junk", "text after ']'"),
    ("[]", "a section is [group], [group:vars] or [group:children], with no spaces"),
    ("[web:]", "a section is [group], [group:vars] or [group:children], with no spaces"),
    ("[ web]", "a section is [group], [group:vars] or [group:children], with no spaces"),
])
def test_broken_section_header_is_bad_input_at_its_line(tmp_path: Path, header: str, reason: str) -> None:
    inv = tmp_path / "that.ini"
    inv.write_text(f"{header}\nweb1 connection=local\n")
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert f"ERROR: {inv}:1:1: invalid section header '{header}': {reason}" in err
    assert "nothing was run" in err
    assert not touched.exists()


@pytest.mark.parametrize("state", ["[web]\nw1 connection=local", "[web:vars]\nk=v", "[all:children]\nweb"])
def test_broken_section_header_after_any_section(tmp_path: Path, state: str) -> None:
    inv = tmp_path / "that.ini"
    inv.write_text(f"[web]\nw0 connection=local\n{state}\n[db\ndb1 connection=local\n")
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert f"{inv}:5:1: invalid section header '[db': no closing ']'" in err
    assert not touched.exists()


def test_host_line_opening_with_a_range_is_still_a_host(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text("[g]\n[1:2]-node connection=local\n[a:b].x connection=local # comment\n")
    res = cli("inventory", "-i", str(inv), "--graph", cwd=tmp_path)
    assert res.rc == 0, res.err
    assert [ln.strip(" |-") for ln in res.out.splitlines()][-4:] == ["1-node", "2-node", "a.x", "b.x"]


# -- group_names --------------------------------------------------------------------------------
GROUPS_INI = """\
loner connection=local
[db]
db1 connection=local
[prod:children]
db
[app]
app1 connection=local
[a_first:children]
app
[Zed]
app1
"""


def test_group_names_are_sorted_by_name_as_in_ansible(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text(GROUPS_INI)
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"debug": {"msg": "names={{ group_names | join(',') }}"}}]}])
    res = cli("play", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 0, res.err
    # ansible-core: sorted(), so a child group (db) before its parent (prod), capitals first;
    # it also lists `ungrouped` for loner, where opsrunner gives [] (not changed here).
    assert "ok: [db1] => names=db,prod" in res.out
    assert "ok: [app1] => names=Zed,a_first,app" in res.out
    assert "ok: [loner] => names=\n" in res.out


def test_group_precedence_stays_parent_before_child(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text(GROUPS_INI + "[db:vars]\nlevel=db\n[prod:vars]\nlevel=prod\n")
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "db1", "gather_facts": False, "tasks": [
        {"debug": {"msg": "level={{ level }}"}}]}])
    res = cli("play", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "ok: [db1] => level=db" in res.out  # the child group wins, as in ansible-core

