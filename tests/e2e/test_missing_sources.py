"""A controller path a task reads that is given through a variable (`src: "{{ code_src }}"`)
and does not exist is bad input, found before any host is touched (exit 4), at the place the
value was set (-e, the inventory), as a literal path is at load. It failed only at the
deploy, on every host, after the run took the job's lock, and a schedule added with it failed
every night. Where an earlier task of the run may make it on this machine (a build step
delegated to localhost, a command on a host of the local connection), it is left to the run."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, write_inventory, write_yaml
from tests.helpers import cli

#: A host that is never reached: `check` and a refused `play` contact no host.
REMOTE = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "nobody"}


def _playbook(tmp_path: Path, before: list[dict[str, object]]) -> Path:
    return write_yaml(tmp_path / "pb.yml", [{"hosts": "all", "tasks": [
        *before, {"name": "deploy", "deploy_code": {"src": "{{ code_src }}", "dest": str(tmp_path / "dest")}}]}])


def test_a_missing_source_from_e_is_refused_before_any_host_is_touched(tmp_path: Path) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"gpu1": REMOTE})
    pb = _playbook(tmp_path, [{"name": "lock", "debug": {"msg": "x"}}])
    for command in ("check", "play"):
        res = cli(command, str(pb), "-i", str(inv), "-e", "code_src=/nonexistent/src", cwd=tmp_path)
        assert res.rc == 4, res.out + res.err
        assert res.err.startswith("ERROR: -e code_src=/nonexistent/src: deploy_code src '/nonexistent/src' not "
                                  "found on this machine (from {{ code_src }}); used by deploy_code.src at "
                                  f"{pb}:"), res.err
        assert "nothing was run" in res.err and "PLAY [" not in res.out
    found = cli("check", str(pb), "-i", str(inv), "-e", f"code_src={ROOT / 'examples' / 'demo_trainer'}",
                cwd=tmp_path)
    assert found.rc == 0, found.err


def test_one_set_in_the_inventory_is_told_at_its_line(tmp_path: Path) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"gpu1": REMOTE}, all_vars={"code_src": "src/missing"})
    res = cli("check", str(_playbook(tmp_path, [])), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 4
    assert res.err.startswith(f"ERROR: {inv}:"), res.err
    assert f"deploy_code src 'src/missing' not found (looked in {tmp_path}) (from {{{{ code_src }}}})" in res.err


def test_one_an_earlier_task_may_make_on_this_machine_is_left_to_the_run(tmp_path: Path) -> None:
    build = {"name": "build", "command": "make dist", "delegate_to": "localhost"}
    remote = write_inventory(tmp_path / "remote.yml", {"gpu1": REMOTE})
    assert cli("check", str(_playbook(tmp_path, [build])), "-i", str(remote), "-e", "code_src=/nonexistent/dist",
               cwd=tmp_path).rc == 0
    # on a host of the local connection, a command before it runs here; a debug makes nothing
    local = write_inventory(tmp_path / "local.yml", {"box": {"connection": "local"}})
    made = cli("check", str(_playbook(tmp_path, [{"name": "make", "shell": "make dist"}])), "-i", str(local),
               "-e", "code_src=/nonexistent/dist", cwd=tmp_path)
    assert made.rc == 0, made.err
    told = cli("check", str(_playbook(tmp_path, [{"name": "say", "debug": {"msg": "x"}}])), "-i", str(local),
               "-e", "code_src=/nonexistent/dist", cwd=tmp_path)
    assert told.rc == 4 and "deploy_code src '/nonexistent/dist' not found on this machine" in told.err
    # a play before that makes it on this machine counts too
    two = write_yaml(tmp_path / "two.yml", [
        {"hosts": "localhost", "gather_facts": False, "tasks": [{"name": "build", "shell": "make dist"}]},
        {"hosts": "gpu1", "tasks": [{"name": "deploy", "deploy_code": {"src": "{{ code_src }}",
                                                                       "dest": str(tmp_path / "dest")}}]}])
    both = write_inventory(tmp_path / "both.yml", {"localhost": {"connection": "local"}, "gpu1": REMOTE})
    assert cli("check", str(two), "-i", str(both), "-e", "code_src=/nonexistent/dist", cwd=tmp_path).rc == 0
