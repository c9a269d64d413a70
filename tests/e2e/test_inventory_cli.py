"""`opsrunner inventory` prints what ansible-inventory prints (--list, --host, --graph).

The expected outputs in data/ansible_inventory_2_19.json were observed with ansible-core
2.19 (ansible-inventory 2.19.14) on the inventories below, so these tests need no
ansible-core; the tree is written here exactly as it was given to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli, cli_subprocess

YAML_FILES = {
    "hosts.yml": """\
all:
  vars:
    site: lab
  hosts:
    solo:
  children:
    web:
      hosts:
        web[01:03]:
          http_port: 8080
      vars:
        role: frontend
      children:
        edge:
          hosts:
            web01:
              tier: edge
    db:
      hosts:
        db1: {replicas: 2}
    empty:
      hosts:
      children:
    nested:
      children:
        inner:
          hosts:
            deep1:
""",
    "group_vars/web.yml": "from_group_vars: 1\nshared: [1, two, {three: 3}]\n",
    "group_vars/all.yml": "ntp: pool.example\n",
    "host_vars/db1.yml": "from_host_vars: true\nlimits: {cpu: 4, tags: [a, b]}\n",
}
INI_FILES = {
    "hosts.ini": """\
loose1 ansible_host=10.0.0.5
[web]
web[1:2] ansible_user=deploy

[db]
db1 n=5 f=1.5 b=True

[app:children]
web
db

[app:vars]
env=prod
quoted="hello world"

[lonely]
""",
}
RECORDED = json.loads((Path(__file__).parent / "data" / "ansible_inventory_2_19.json").read_text())["cases"]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    return {"yaml": write_tree(tmp_path / "yaml", YAML_FILES), "ini": write_tree(tmp_path / "ini", INI_FILES)}


@pytest.mark.parametrize("case", RECORDED, ids=[f"{c['inventory']} {c['args']}" for c in RECORDED])
def test_output_is_ansible_inventorys_byte_for_byte(trees: dict[str, Path], case: dict[str, str]) -> None:
    res = cli("inventory", "-i", str(trees[case["inventory"]]), *case["args"].split())
    assert (res.rc, res.err) == (0, "")
    assert res.out == case["stdout"]


def test_list_shape_nested_ranges_null_sections(trees: dict[str, Path]) -> None:
    data = json.loads(cli("inventory", "-i", str(trees["yaml"]), "--list").out)
    assert data["all"]["children"] == ["ungrouped", "web", "db", "empty", "nested"]
    assert data["web"] == {"children": ["edge"], "hosts": ["web01", "web02", "web03"]}
    assert "empty" not in data  # null hosts:/children: - named as a child, not listed
    assert data["ungrouped"] == {"hosts": ["solo"]}
    assert data["_meta"]["hostvars"]["db1"]["limits"] == {"cpu": 4, "tags": ["a", "b"]}  # host_vars/
    assert data["_meta"]["hostvars"]["web02"]["from_group_vars"] == 1  # group_vars/


def test_a_group_defined_first_then_made_a_child_is_not_under_all(tmp_path: Path) -> None:
    inv = tmp_path / "h.ini"
    inv.write_text("[web]\nw1\n[top:children]\nweb\n")
    data = json.loads(cli("inventory", "-i", str(inv), "--list").out)
    assert data["all"]["children"] == ["ungrouped", "top"]
    assert cli("inventory", "-i", str(inv), "--graph").out == "@all:\n  |--@ungrouped:\n  |--@top:\n  |  |--@web:\n" \
        "  |  |  |--w1\n"


SECRET_INVENTORY = """\
all:
  hosts:
    h1:
      db_password: hunter22
      note: "uses hunter22 as well"
      token_plain: !secret s3cr3t-value
      port_label: 8080
"""


def test_secrets_are_masked_unless_asked_for(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yml"
    inv.write_text(SECRET_INVENTORY)
    for args in (["--list"], ["--host", "h1"], ["--graph", "--vars"], ["--list", "--yaml"]):
        out = cli("inventory", "-i", str(inv), *args).out
        assert "hunter22" not in out and "s3cr3t-value" not in out, args
        assert "********" in out and "8080" in out
    host = json.loads(cli("inventory", "-i", str(inv), "--host", "h1").out)
    assert host == {"db_password": "********", "note": "uses ******** as well", "token_plain": "********",
                    "port_label": 8080}
    shown = json.loads(cli("inventory", "-i", str(inv), "--host", "h1", "--show-secrets").out)
    assert shown["db_password"] == "hunter22" and shown["token_plain"] == "s3cr3t-value"


def test_bad_inventory_names_file_line_col_and_exits_4(tmp_path: Path) -> None:
    inv = tmp_path / "bad.yml"
    inv.write_text("all:\n  children:\n    web:\n      hosts:\n        web[01:x]:\n")
    res = cli_subprocess("inventory", "-i", str(inv), "--list")  # a real process: the exit status
    assert res.rc == 4
    assert f"{inv}:5:9: bad host range in 'web[01:x]'" in res.err
    assert res.out == ""


@pytest.mark.parametrize(("args", "message"), [
    (["--graph", "nope"], "there is no group 'nope'"),
    (["--host", "web0*"], "names 3"),
    # ansible-inventory 2.19's words and exit code (5) for no action and for two
    ([], "No action selected, at least one of --host, --graph or --list needs to be specified."),
    (["--list", "--graph"], "Conflicting options used (--list --graph), only one of --host, --graph or --list"),
])
def test_usage_errors_exit_5(trees: dict[str, Path], args: list[str], message: str) -> None:
    res = cli("inventory", "-i", str(trees["yaml"]), *args)
    assert res.rc == 5
    assert message in res.err


def test_ini_host_port_keeps_opsrunners_name(tmp_path: Path) -> None:
    """ansible-inventory shows `web3:2222` as ansible_port; opsrunner's INI reader stores its own
    `port` (which wins over ansible_port), and shows that: the one known difference."""
    inv = tmp_path / "h.ini"
    inv.write_text("[web]\nweb3:2222\n")
    assert json.loads(cli("inventory", "-i", str(inv), "--host", "web3").out) == {"port": 2222}
