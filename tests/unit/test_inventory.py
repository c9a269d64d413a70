"""Inventory groups, vars precedence and host patterns (pure logic on real YAML files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsrunner.connections.wrappers import ArgvLayer, ShellLayer
from opsrunner.errors import SourcePos
from opsrunner.hostvars import VariableManager, connection_spec
from opsrunner.inventory import load_inventory
from opsrunner.playbook import Play, Role, Task
from tests.conftest import write_yaml

INVENTORY = """
all:
  vars: {level: all, only_all: a}
  hosts:
    loner: {}
  children:
    trainers:
      vars: {level: trainers, only_trainers: t}
      children:
        h100:
          vars: {level: h100}
          hosts:
            gpu-1: {level: host}
            gpu-2: {}
        a100:
          hosts:
            gpu-3: {port: 2222}
    web:
      hosts:
        web-1: {}
        gpu-1: {}
"""


@pytest.fixture
def inv(tmp_path: Path):
    return load_inventory([write_yaml(tmp_path / "inv.yml", INVENTORY)])


def test_groups_nested(inv) -> None:
    assert inv.group_hosts("trainers") == ["gpu-1", "gpu-2", "gpu-3"]
    assert inv.hosts["gpu-1"].groups == ["all", "h100", "trainers", "web"]  # by name, as group_names
    assert inv.group_hosts("ungrouped") == ["loner"]


@pytest.mark.parametrize("pattern,expected", [
    ("all", ["loner", "gpu-1", "gpu-2", "gpu-3", "web-1"]),
    ("h100", ["gpu-1", "gpu-2"]),
    ("gpu-*", ["gpu-1", "gpu-2", "gpu-3"]),
    ("h100:a100", ["gpu-1", "gpu-2", "gpu-3"]),
    ("trainers:&web", ["gpu-1"]),
    ("trainers:!h100", ["gpu-3"]),
    ("all:!trainers:!loner", ["web-1"]),
    ("~gpu-[12]", ["gpu-1", "gpu-2"]),
    ("web-1,loner", ["web-1", "loner"]),
    ("nosuch", []),
])
def test_patterns(inv, pattern: str, expected: list[str]) -> None:
    assert inv.select(pattern) == expected


def _play(**kw) -> Play:
    return Play(name="p", hosts="all", pos=SourcePos("x"), vars=kw.get("vars", {}), tasks=(), handlers=(),
                role_defaults=kw.get("role_defaults", {}))


def test_vars_precedence_order(inv) -> None:
    role = Role("r", Path("."), defaults={"level": "role-default", "d": 1}, vars={"rv": "role"})
    task = Task("t", "debug", {}, SourcePos("x"), {"vars": {"tv": "task"}}, role=role)
    vm = VariableManager(inv, {"ev": "extra"}, False)
    play = _play()
    v = vm.for_task(play, task, "gpu-2", ["gpu-2"])
    assert v["level"] == "h100"  # child group beats parent group, all, and role defaults
    assert vm.for_task(play, task, "gpu-1", [])["level"] == "host"  # host vars beat groups
    assert vm.for_task(play, task, "loner", [])["level"] == "all"
    assert vm.for_task(play, task, "loner", [])["d"] == 1  # role defaults are the floor
    play_v = _play(vars={"level": "play"})
    assert vm.for_task(play_v, task, "gpu-1", [])["level"] == "play"  # play beats host
    role2 = Role("r", Path("."), defaults={}, vars={"level": "role-vars"})
    task2 = Task("t", "debug", {}, SourcePos("x"), {"vars": {}}, role=role2)
    assert vm.for_task(play_v, task2, "gpu-1", [])["level"] == "role-vars"  # role vars beat play
    task3 = Task("t", "debug", {}, SourcePos("x"), {"vars": {"level": "task"}}, role=role2)
    assert vm.for_task(play_v, task3, "gpu-1", [])["level"] == "task"  # task vars beat role vars
    vm.register("gpu-1", "level", "registered")
    assert vm.for_task(play_v, task3, "gpu-1", [])["level"] == "registered"
    vm2 = VariableManager(inv, {"level": "extra"}, False)
    vm2.register("gpu-1", "level", "registered")
    assert vm2.for_task(play_v, task3, "gpu-1", [])["level"] == "extra"  # -e beats everything


def test_magic_vars_and_hostvars(inv) -> None:
    vm = VariableManager(inv, {}, False)
    v = vm.for_task(_play(), None, "gpu-1", ["gpu-1", "gpu-3"])
    assert v["inventory_hostname"] == "gpu-1"
    assert v["groups"]["h100"] == ["gpu-1", "gpu-2"]
    assert v["hostvars"]["gpu-3"]["port"] == 2222
    assert v["play_hosts"] == ["gpu-1", "gpu-3"]
    assert v["group_names"] == ["h100", "trainers", "web"]  # sorted, as ansible-core's


def test_connection_spec_defaults_and_templating(inv) -> None:
    vm = VariableManager(inv, {}, False)
    play = _play(vars={"ctid": 200, "wrapper": ["pct exec {{ ctid }} --", {"shell": "ssh inner"}]})
    spec = connection_spec("gpu-3", vm.for_task(play, None, "gpu-3", []))
    assert (spec.kind, spec.host, spec.port, spec.host_key_checking) == ("ssh", "gpu-3", 2222, "strict")
    assert spec.wrapper == (ArgvLayer(("pct", "exec", "200", "--")), ShellLayer(("ssh", "inner")))
    local = connection_spec("localhost", vm.for_task(_play(), None, "loner", []).child({}))
    assert local.kind == "local"


def test_inventory_directory_merges_files(tmp_path: Path) -> None:
    d = tmp_path / "inv"
    write_yaml(d / "10-base.yml", "all:\n  vars: {x: 1}\n  children:\n    trainers:\n      hosts: {a: {}}\n")
    write_yaml(d / "20-more.yml", "all:\n  children:\n    trainers:\n      hosts: {b: {y: 2}}\n")
    (d / "README.txt").write_text("not yaml, ignored")
    inv = load_inventory([d])
    assert inv.group_hosts("trainers") == ["a", "b"]
    assert inv.hosts["b"].vars == {"y": 2}


def test_magic_vars_are_the_ones_the_masker_passes_by(inv) -> None:
    """The masker does not search the engine's magic variables for secrets (secrets.py says
    why); a magic variable added to hostvars.py must be added to that list too."""
    from opsrunner.secrets import ENGINE_MADE_VARS

    vm = VariableManager(inv, {}, False)
    assert set(vm._magic(_play(), "gpu-1", ["gpu-1"], None)) == ENGINE_MADE_VARS
