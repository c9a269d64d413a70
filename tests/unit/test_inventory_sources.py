"""INI and host-list sources, host ranges, group_vars/host_vars precedence and host patterns.

Every expectation here was first observed with ansible-core 2.19 on the same files
(`ansible-playbook -i ... -c local` printing the variables); the suite does not need it."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsrunner.errors import ValidationError
from opsrunner.hostvars import VariableManager, connection_spec
from opsrunner.inventory import PatternError, load_inventory, split_host_pattern
from opsrunner.playbook import load_playbook
from tests.conftest import write_yaml
from tests.helpers import cli

INI = """\
# comment
loner

[all:vars]
x=inv_all
y=inv_all

[web]
web[01:03] z=hostline n=5 b=True l="[1,2]"
db-[a:c]:2222

[web:vars]
y=inv_web
s=FALSE

[gpu:children]
web
"""


def ini_inventory(tmp_path: Path, text: str = INI, name: str = "hosts.ini") -> Path:
    path = tmp_path / "inv" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def host_vars(inv_path: Path, host: str, playbook_dir: Path | None = None) -> dict[str, object]:
    pb = write_yaml((playbook_dir or inv_path.parent.parent / "elsewhere") / "pb.yml", [{"hosts": "all", "tasks": []}])
    inventory = load_inventory([inv_path], playbook_dir)
    variables = VariableManager(inventory, {}, False).for_task(load_playbook(pb).plays[0], None, host, [host])
    return {k: variables[k] for k in variables if k not in ("hostvars", "groups")}


def test_ini_groups_ranges_ports_and_children(tmp_path: Path) -> None:
    inv = load_inventory([ini_inventory(tmp_path)])
    assert list(inv.hosts) == ["loner", "web01", "web02", "web03", "db-a", "db-b", "db-c"]
    assert inv.group_hosts("web") == ["web01", "web02", "web03", "db-a", "db-b", "db-c"]
    assert inv.group_hosts("gpu") == inv.group_hosts("web")
    assert inv.group_hosts("ungrouped") == ["loner"]
    assert inv.hosts["db-b"].vars == {"port": 2222}
    assert inv.hosts["web02"].groups == ["all", "gpu", "web"]


def test_ini_values_are_python_literals_on_host_lines_and_in_vars_sections(tmp_path: Path) -> None:
    got = host_vars(ini_inventory(tmp_path), "web01")
    assert got["n"] == 5 and got["b"] is True and got["l"] == [1, 2]
    assert got["s"] == "FALSE"  # not a literal: stays a string
    assert (got["x"], got["y"], got["z"]) == ("inv_all", "inv_web", "hostline")


def test_ranges_zero_padding_letters_and_step(tmp_path: Path) -> None:
    inv = load_inventory([ini_inventory(tmp_path, "[g]\nn[08:11]\nr-[x:z]\ns[1:9:4]\nm[1:2]-[a:b]\n")])
    assert list(inv.hosts) == ["n08", "n09", "n10", "n11", "r-x", "r-y", "r-z", "s1", "s5", "s9",
                               "m1-a", "m1-b", "m2-a", "m2-b"]


def test_yaml_inventory_accepts_ranges_too(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "hosts.yml", {"all": {"children": {"t": {"hosts": {"gpu-[1:3]": {"port": 22}}}}}})
    inv = load_inventory([path])
    assert inv.group_hosts("t") == ["gpu-1", "gpu-2", "gpu-3"]
    assert inv.hosts["gpu-3"].vars == {"port": 22}


@pytest.mark.parametrize(("text", "line", "message"), [
    ("[web]\nh1\n[web:nonsense]\nh2\n", 3, "section [web:nonsense] has unknown type: nonsense"),
    ("[web]\nh1 ansible_port\n", 2, "expected key=value host variable, got 'ansible_port'"),
    ("[web:children]\nmissing\n", 2, "section [web:children] includes undefined group 'missing'"),
    ("[ghost:vars]\nk=v\n", 1, "section [ghost:vars] names undefined group 'ghost'"),
    ("[web]\nh[3:1x]\n", 2, "bad host range in 'h[3:1x]'"),
    ("[web]\nh[01:100]\n", 2, "equal-length begin and end"),
    ("[web]\nh1 port=notaport\n", 2, "is not valid here"),
    ("[web ]\nh1\n", 1, "invalid section header '[web ]'"),
])
def test_ini_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = ini_inventory(tmp_path, text)
    with pytest.raises(ValidationError) as caught:
        load_inventory([path])
    rendered = str(caught.value)
    assert f"{path}:{line}:" in rendered
    assert message in rendered


def test_extensionless_file_is_read_as_ini_or_yaml_by_content(tmp_path: Path) -> None:
    ini = ini_inventory(tmp_path, "h1\nh2 port=2200\n", name="hosts")
    assert list(load_inventory([ini]).hosts) == ["h1", "h2"]
    yml = tmp_path / "y" / "hosts"
    write_yaml(yml, {"all": {"hosts": {"y1": None}}})
    assert list(load_inventory([yml]).hosts) == ["y1"]


def test_host_list_source(tmp_path: Path) -> None:
    inv = load_inventory(["web1,web2,", "db1,"])
    assert list(inv.hosts) == ["web1", "web2", "db1"]
    assert inv.group_hosts("ungrouped") == ["web1", "web2", "db1"]


def test_directory_of_mixed_sources_skips_vars_dirs_and_ignored_files(tmp_path: Path) -> None:
    folder = tmp_path / "inv"
    write_yaml(folder / "a.yml", {"all": {"hosts": {"from-yaml": None}}})
    (folder / "b.ini").write_text("[ini]\nfrom-ini\n")
    (folder / "README.md").write_text("# not an inventory [x]\n")
    write_yaml(folder / "group_vars" / "ini.yml", {"k": "gv"})
    inv = load_inventory([folder])
    assert list(inv.hosts) == ["from-yaml", "from-ini"]
    assert host_vars(folder, "from-ini")["k"] == "gv"


# Each tier sets a<k> and a<k-1>; the winner of every adjacent pair is the higher tier, as
# ansible-core 2.19 printed for the same files.
TIERS = ["inv_all", "inv_web", "inv_child", "gvinv_all", "gvpb_all", "gvinv_web", "gvinv_child",
         "gvpb_web", "gvpb_child", "inv_host", "hvinv", "hvpb"]
FILES = {"gvinv_all": "inv/group_vars/all.yml", "gvpb_all": "pb/group_vars/all.yml",
         "gvinv_web": "inv/group_vars/web.yml", "gvinv_child": "inv/group_vars/child/main.yml",
         "gvpb_web": "pb/group_vars/web", "gvpb_child": "pb/group_vars/child.json",
         "hvinv": "inv/host_vars/web01.yaml", "hvpb": "pb/host_vars/web01.yml"}


def _tier_vars(k: int) -> dict[str, str]:
    return {f"a{k}": TIERS[k], **({f"a{k - 1}": TIERS[k]} if k else {})}


def _kv(k: int, sep: str) -> str:
    return sep.join(f"{a}={b}" for a, b in _tier_vars(k).items())


def test_vars_precedence_matches_ansible(tmp_path: Path) -> None:
    for k, tier in enumerate(TIERS):
        if tier in FILES:
            path = tmp_path / FILES[tier]
            path.parent.mkdir(parents=True, exist_ok=True)
            body = _tier_vars(k)
            path.write_text(str(body).replace("'", '"') if path.suffix == ".json"
                            else "".join(f"{a}: {b}\n" for a, b in body.items()))
    ini = (f"[all:vars]\n{_kv(0, chr(10))}\n[web:children]\nchild\n[web:vars]\n{_kv(1, chr(10))}\n"
           f"[child]\nweb01 {_kv(9, ' ')}\n[child:vars]\n{_kv(2, chr(10))}\n")
    inv_path = ini_inventory(tmp_path, ini)
    (tmp_path / "pb").mkdir(exist_ok=True)
    got = host_vars(inv_path, "web01", tmp_path / "pb")
    assert [got[f"a{k}"] for k in range(len(TIERS) - 1)] == TIERS[1:]


def test_group_vars_directory_shadows_file_of_the_same_name(tmp_path: Path) -> None:
    inv_path = ini_inventory(tmp_path, "[web]\nw1\n")
    write_yaml(inv_path.parent / "group_vars" / "web.yml", {"k": "file", "only_file": 1})
    write_yaml(inv_path.parent / "group_vars" / "web" / "10.yml", {"k": "dir-10"})
    write_yaml(inv_path.parent / "group_vars" / "web" / "20.yml", {"k": "dir-20"})
    got = host_vars(inv_path, "w1")
    assert got["k"] == "dir-20"
    assert "only_file" not in got


def test_bad_vars_files_fail_with_file_and_line(tmp_path: Path) -> None:
    inv_path = ini_inventory(tmp_path, "[web]\nw1\n")
    write_yaml(inv_path.parent / "group_vars" / "web.yml", "- not\n- a mapping\n")
    write_yaml(inv_path.parent / "host_vars" / "w1.yml", "port: [1\n")
    res = cli("check", str(write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": []}])), "-i", str(inv_path))
    assert res.rc == 4
    assert f"{inv_path.parent}/group_vars/web.yml:1:1: a vars file must be a mapping" in res.err
    assert f"{inv_path.parent}/host_vars/w1.yml:2:" in res.err and "YAML syntax error" in res.err


def test_ansible_connection_variable_names(tmp_path: Path) -> None:
    inv_path = ini_inventory(tmp_path, "[t]\ngpu1 ansible_host=127.0.0.2 ansible_port=2201 ansible_user=trainer\n"
                                       "gpu2 host=127.0.0.3 ansible_host=ignored ansible_connection=local\n")
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": []}])
    inventory = load_inventory([inv_path])
    manager = VariableManager(inventory, {}, False)
    play = load_playbook(pb).plays[0]
    one = connection_spec("gpu1", manager.for_task(play, None, "gpu1", ["gpu1"]))
    assert (one.host, one.port, one.user, one.kind) == ("127.0.0.2", 2201, "trainer", "ssh")
    two = connection_spec("gpu2", manager.for_task(play, None, "gpu2", ["gpu2"]))
    assert (two.host, two.kind) == ("127.0.0.3", "local")


# -- patterns -----------------------------------------------------------------------------------
def test_split_host_pattern() -> None:
    assert split_host_pattern("a,b[1], c[2:3] , d") == ["a", "b[1]", "c[2:3]", "d"]
    assert split_host_pattern("web:!db-a:&gpu") == ["web", "!db-a", "&gpu"]
    assert split_host_pattern("web[1:]") == ["web[1:]"]
    assert split_host_pattern(["a:b", "c"]) == ["a", "b", "c"]


@pytest.mark.parametrize(("pattern", "expected"), [
    ("web[0]", ["web01"]),
    ("web[-1]", ["db-c"]),
    ("web[1:]", ["web02", "web03", "db-a", "db-b", "db-c"]),
    ("web[0:2]", ["web01", "web02", "web03"]),  # inclusive end, as ansible-core
    ("web[2:2]", ["web03"]),
    ("web[1:],&db-*", ["db-a", "db-b", "db-c"]),
    ("web:!web0[12]", ["web01", "web02", "web03", "db-a", "db-b", "db-c"]),  # [12] is a subscript of 'web0'
    ("web:!web0?", ["db-a", "db-b", "db-c"]),
    ("~web0[13]", ["web01", "web03"]),
    ("~eb", []),  # a regex is anchored at the start, like re.match
    ("!loner", ["web01", "web02", "web03", "db-a", "db-b", "db-c"]),
    ("db-*,web01,db-a", ["db-a", "db-b", "db-c", "web01"]),
])
def test_patterns_match_ansible(tmp_path: Path, pattern: str, expected: list[str]) -> None:
    assert load_inventory([ini_inventory(tmp_path)]).select(pattern) == expected


@pytest.mark.parametrize(("pattern", "message"), [
    ("web[9]", "no hosts matched the subscripted pattern 'web[9]'"),
    ("~((", "invalid host pattern '~(('"),
])
def test_bad_patterns_are_errors(tmp_path: Path, pattern: str, message: str) -> None:
    with pytest.raises(PatternError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_inventory([ini_inventory(tmp_path)]).select(pattern)


def test_play_hosts_as_list_and_subscripted_limit(tmp_path: Path) -> None:
    inv_path = ini_inventory(tmp_path)
    pb = write_yaml(tmp_path / "pb.yml", [{"hosts": ["web[0]", "db-*"], "tasks": []}])
    res = cli("play", str(pb), "-i", str(inv_path), "--list-hosts", "-l", "web[4:]")
    assert res.rc == 0, res.err
    assert "play #1 (web[0],db-*): web[0],db-*\tHOSTS (2):\n    db-b\n    db-c\n" in res.out


@pytest.mark.parametrize(("limit", "play_hosts", "rc", "message"), [
    ("~((", "all", 5, "ERROR: invalid host pattern '~(('"),  # the command line's mistake
    ("all", "web[7]", 4,  # the playbook's: bad input, located at the play's hosts:
     "pb.yml:4:3: hosts pattern 'web[7]': no hosts matched the subscripted pattern 'web[7]' (at hosts)"),
])
def test_bad_pattern_stops_the_run_before_any_task(tmp_path: Path, limit: str, play_hosts: str, rc: int,
                                                   message: str) -> None:
    marker_file = tmp_path / "touched"
    inv_path = ini_inventory(tmp_path, "[web]\nw1 connection=local\n")
    pb = write_yaml(tmp_path / "pb.yml", [
        {"hosts": "all", "tasks": [{"command": f"touch {marker_file}"}]},
        {"hosts": play_hosts, "tasks": [{"command": "true"}]},
    ])
    res = cli("play", str(pb), "-i", str(inv_path), "-l", limit)
    assert res.rc == rc
    assert message in res.err
    assert not marker_file.exists()


def test_group_vars_beside_the_playbook_reach_a_real_run(tmp_path: Path) -> None:
    inv_path = ini_inventory(tmp_path, "[web]\nw1 connection=local\n")
    pb = write_yaml(tmp_path / "play" / "pb.yml", [
        {"hosts": "web", "tasks": [{"command": "echo {{ greeting }} {{ size }}", "register": "r"},
                                   {"debug": {"var": "r.stdout"}}]}])
    write_yaml(tmp_path / "play" / "group_vars" / "web.yml", {"greeting": "from-playbook-group-vars"})
    write_yaml(inv_path.parent / "host_vars" / "w1", {"size": 3})
    res = cli("play", str(pb), "-i", str(inv_path), "-v")
    assert res.rc == 0, res.err
    assert "from-playbook-group-vars 3" in res.out
