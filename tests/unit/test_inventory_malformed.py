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
    # `ungrouped` for loner, which is in no group.
    assert "ok: [db1] => names=db,prod" in res.out
    assert "ok: [app1] => names=Zed,a_first,app" in res.out
    assert "ok: [loner] => names=ungrouped\n" in res.out


UNGROUPED_INI = """\
lonely connection=local
both connection=local
[web]
w1 connection=local
both
"""
UNGROUPED_YAML = """\
all:
  hosts:
    lonely: {connection: local}
    both: {connection: local}
  children:
    web:
      hosts:
        w1: {connection: local}
        both: {}
    ungrouped:
      hosts:
        listed: {connection: local}
"""


@pytest.mark.parametrize("name,text", [("hosts.ini", UNGROUPED_INI), ("hosts.yml", UNGROUPED_YAML)],
                         ids=["ini", "yaml"])
def test_a_host_in_no_group_has_group_names_ungrouped_as_in_ansible(tmp_path: Path, name: str, text: str) -> None:
    inv = tmp_path / name
    inv.write_text(text)
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "gather_facts": False, "tasks": [
        {"debug": {"msg": "{{ inventory_hostname }}={{ group_names }} ungrouped={{ groups.ungrouped }}"}}]}])
    res = cli("play", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 0, res.err
    # ansible-core 2.19 on the same files: a host at the top level only is `ungrouped`; one also
    # in a group (`both`, here listed before its group) is only in that group.
    ungrouped = "['lonely']" if name.endswith(".ini") else "['listed', 'lonely']"
    assert f"ok: [lonely] => lonely=['ungrouped'] ungrouped={ungrouped}\n" in res.out, res.out
    assert f"ok: [both] => both=['web'] ungrouped={ungrouped}\n" in res.out
    assert f"ok: [w1] => w1=['web'] ungrouped={ungrouped}\n" in res.out
    if name.endswith(".yml"):  # put in `ungrouped` by name: the same
        assert f"ok: [listed] => listed=['ungrouped'] ungrouped={ungrouped}\n" in res.out


def test_a_host_given_on_the_command_line_is_ungrouped(tmp_path: Path) -> None:
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "gather_facts": False, "vars": {"connection": "local"},
                                           "tasks": [{"debug": {"msg": "names={{ group_names }}"}}]}])
    res = cli("play", str(pb), "-i", "solo,", cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "ok: [solo] => names=['ungrouped']\n" in res.out


def test_group_precedence_stays_parent_before_child(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text(GROUPS_INI + "[db:vars]\nlevel=db\n[prod:vars]\nlevel=prod\n")
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "db1", "gather_facts": False, "tasks": [
        {"debug": {"msg": "level={{ level }}"}}]}])
    res = cli("play", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 0, res.err
    assert "ok: [db1] => level=db" in res.out  # the child group wins, as in ansible-core


# -- numeric connection settings ----------------------------------------------------------------
PORT_CASES = [
    ("ini host line", "hosts.ini", "[web]\nweb1 connection=local ansible_port=abc\n", 2,
     "ansible_port must be an integer 1-65535, got 'abc' (at web.web1.ansible_port)"),
    ("ini out of range", "hosts.ini", "[web]\nweb1 connection=local ansible_ssh_port=70000\n", 2,
     "ansible_ssh_port must be an integer 1-65535, got 70000 (at web.web1.ansible_ssh_port)"),
    ("ini vars section", "hosts.ini", "[web]\nweb1 connection=local\n\n[web:vars]\nx=1\nansible_port=abc\n", 6,
     "ansible_port must be an integer 1-65535, got 'abc' (at web.vars.ansible_port)"),
    ("ini all:vars, own name", "hosts.ini", "web1 connection=local\n[all:vars]\nx=1\nport=abc\n", 4,
     "'abc' is not valid here: expected integer >= 1 <= 65535 or a {{ template }} (at all.vars.port)"),
    ("ini group vars, timeout", "hosts.ini", "[web]\nweb1 connection=local\n[web:vars]\nconnect_timeout=soon\n", 4,
     "'soon' is not valid here: expected number > 0 or a {{ template }} (at web.vars.connect_timeout)"),
    ("ini second host line", "hosts.ini", "[web]\nweb1 connection=local\n[db]\nweb1 port=abc\n", 4,
     "(at web1.port)"),
    ("yaml host", "hosts.yml", "all:\n  hosts:\n    web1:\n      connection: local\n      ansible_port: notaport\n",
     5, "ansible_port must be an integer 1-65535, got 'notaport' (at all.hosts.web1.ansible_port)"),
    ("yaml group vars", "hosts.yml", "all:\n  vars:\n    ansible_port: [22]\n  hosts:\n    web1: {connection: local}\n",
     3, "ansible_port must be an integer 1-65535, got [22] (at all.vars.ansible_port)"),
    ("yaml bool", "hosts.yml", "all:\n  hosts:\n    web1: {connection: local, ansible_ssh_port: true}\n",
     3, "ansible_ssh_port must be an integer 1-65535, got True (at all.hosts.web1.ansible_ssh_port)"),
]


@pytest.mark.parametrize(("name", "filename", "text", "line", "message"), PORT_CASES, ids=[c[0] for c in PORT_CASES])
def test_bad_numeric_connection_setting_names_its_line_and_key(tmp_path: Path, name: str, filename: str, text: str,
                                                               line: int, message: str) -> None:
    inv = tmp_path / "inv" / filename
    inv.parent.mkdir()
    inv.write_text(text)
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert f"ERROR: {inv}:{line}:" in err and message in err, err
    assert "invalid literal" not in err and "bad connection setting" not in err
    assert not touched.exists()


def test_bad_port_in_host_vars_file_names_that_file(tmp_path: Path) -> None:
    inv = tmp_path / "inv" / "hosts.ini"
    write_yaml(inv, "[web]\nweb1 connection=local\n")
    host_vars = write_yaml(inv.parent / "host_vars" / "web1.yml", "x: 1\nansible_port: abc\n")
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert f"ERROR: {host_vars}:2:1: ansible_port must be an integer 1-65535, got 'abc' (at ansible_port)" in err
    assert not touched.exists()


@pytest.mark.parametrize("value", ["2222", "'2222'", "\"{{ 2000 + 222 }}\""])
def test_good_ansible_port_values_pass(tmp_path: Path, value: str) -> None:
    inv = write_yaml(tmp_path / "hosts.yml", f"all:\n  hosts:\n    web1: {{ansible_port: {value}}}\n")
    res = cli("inventory", "-i", str(inv), "--host", "web1", cwd=tmp_path)
    assert res.rc == 0, res.err


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_infinite_connect_timeout_is_bad_input(tmp_path: Path, value: str) -> None:
    inv = write_yaml(tmp_path / "hosts.yml", f"all:\n  hosts:\n    web1:\n      connection: local\n"
                                             f"      connect_timeout: {value}\n")
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert f"ERROR: {inv}:5:7: connect_timeout must be a finite number of seconds, got " in err
    assert "(at all.hosts.web1.connect_timeout)" in err
    assert not touched.exists()


@pytest.mark.parametrize(("hostvars", "extra", "message"), [
    ('{ansible_port: "{{ p }}"}', ["-e", "p=abc"],
     "host var 'ansible_port' of web1 must be an integer 1-65535, got 'abc'"),
    ("{}", ["-e", "ansible_port=70000"], "host var 'ansible_port' of web1 must be an integer 1-65535, got '70000'"),
    ("{}", ["-e", "connect_timeout=-1"],
     "host var 'connect_timeout' of web1 must be a positive number of seconds, got '-1'"),
])
def test_a_bad_connection_setting_known_only_once_rendered_names_the_variable(
        tmp_path: Path, hostvars: str, extra: list[str], message: str) -> None:
    """A value that comes through a template or -e is checked when the host's connection is
    built, before any host is touched: the message names the variable as the user wrote it."""
    inv = write_yaml(tmp_path / "hosts.yml", f"all:\n  hosts:\n    web1: {hostvars}\n")
    touched = tmp_path / "touched"
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [{"command": f"touch {touched}"}]}])
    res = cli("play", str(pb), "-i", str(inv), *extra, cwd=tmp_path)
    assert res.rc == 4, res.out + res.err
    assert message in res.err and "invalid literal" not in res.err, res.err
    assert not touched.exists()


@pytest.mark.parametrize(("hostvars", "message"), [
    ('"web1:abc": {}', "host name 'web1:abc' holds a ':': give the port as `port: N`"),
    ('web1: {ansible_host: "db:22x"}', "host var 'ansible_host' of web1 'db:22x' holds a ':'"),
    ("web1: {ansible_connection: telnet}", "host var 'ansible_connection' of web1 must be local or ssh, not 'telnet'"),
])
def test_a_host_address_or_connection_that_ssh_cannot_use_is_bad_input(tmp_path: Path, hostvars: str,
                                                                      message: str) -> None:
    """`web1:abc` would reach ssh as host `web1`, port `abc` (an internal error, exit 250); a
    connection var is named as the user wrote it."""
    inv = write_yaml(tmp_path / "hosts.yml", f"all:\n  hosts:\n    {hostvars}\n")
    rc, err, touched = _play(tmp_path, inv)
    assert rc == 4, err
    assert message in err, err
    assert not touched.exists()
