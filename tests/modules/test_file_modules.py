"""copy, template, file, stat, lineinfile and wait_for through the target agent, over every
transport. Messages and changed/ok were compared with ansible-core 2.19 on the same tasks."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tests.modules.conftest import Target, _target_for

# These tests read and write the target's files from the test itself, so they run over the
# transports whose target shares this machine's filesystem (not the LXC container ones).
SHARED_FS = ["local", "ssh", "ssh+reaper", "ssh+reaper+fd_holder"]


@pytest.fixture(params=SHARED_FS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for(str(request.param), request, tmp_path)


@pytest.fixture(params=["local", "ssh+reaper+fd_holder"])
def edge_target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for(str(request.param), request, tmp_path)


def test_copy_content_idempotent_mode_check_and_diff(target: Target, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "app.conf"
    dest.parent.mkdir()
    task = {"name": "c", "copy": {"content": "a=1\n", "dest": str(dest), "mode": "0600"}}
    first = target.play([task])
    assert first.end("c")["status"] == "changed", first.out
    assert dest.read_text() == "a=1\n" and dest.stat().st_mode & 0o777 == 0o600
    assert target.play([task]).end("c")["status"] == "ok"
    inode = dest.stat().st_ino
    changed = {"name": "c", "copy": {"content": "a=2\n", "dest": str(dest)}}
    dry = target.play([changed], "--check", "--diff")
    assert dry.end("c")["status"] == "changed" and dest.read_text() == "a=1\n"
    assert "-a=1\n+a=2" in dry.out
    real = target.play([changed])
    assert real.end("c")["status"] == "changed" and dest.read_text() == "a=2\n"
    assert dest.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert dest.stat().st_mode & 0o777 == 0o600  # the existing mode is kept
    assert not list(dest.parent.glob(".opsrunner.*"))


def test_copy_src_into_a_folder_and_template(edge_target: Target, tmp_path: Path) -> None:
    src = tmp_path / "files" / "motd"
    src.parent.mkdir()
    src.write_text("hello\n")
    tpl = tmp_path / "app.j2"
    tpl.write_text("host={{ inventory_hostname }}\n{% for p in ports %}port={{ p }}\n{% endfor %}")
    out = tmp_path / "out"
    out.mkdir()
    tasks = [{"name": "cp", "copy": {"src": str(src), "dest": f"{out}/"}},
             {"name": "tp", "template": {"src": str(tpl), "dest": str(out / "app.conf"), "mode": "0640"}}]
    run = edge_target.play(tasks, extra_vars={"ports": [80, 443]})
    assert run.rc == 0, run.out
    assert (out / "motd").read_text() == "hello\n"
    assert (out / "app.conf").read_text() == "host=target\nport=80\nport=443\n"
    assert (out / "app.conf").stat().st_mode & 0o777 == 0o640
    again = edge_target.play(tasks, extra_vars={"ports": [80, 443]})
    assert [again.end(t)["status"] for t in ("cp", "tp")] == ["ok", "ok"]
    diff = edge_target.play(tasks[1:], "--check", "--diff", extra_vars={"ports": [8080]})
    assert diff.end("tp")["status"] == "changed" and "+port=8080" in diff.out
    assert (out / "app.conf").read_text() == "host=target\nport=80\nport=443\n"


def test_file_states_and_stat(edge_target: Target, tmp_path: Path) -> None:
    d, t, link = tmp_path / "d" / "sub", tmp_path / "t", tmp_path / "link"
    tasks = [{"name": "dir", "file": {"path": str(d), "state": "directory", "mode": "0750"}},
             {"name": "touch", "file": {"path": str(t), "state": "touch"}},
             {"name": "link", "file": {"path": str(link), "state": "link", "src": str(t)}},
             {"name": "st", "stat": {"path": str(t)}, "register": "st"},
             {"name": "stl", "stat": {"path": str(link)}, "register": "stl"},
             {"name": "nope", "stat": {"path": str(tmp_path / "nope")}, "register": "nope"},
             {"assert": {"that": ["st.stat.exists and st.stat.isreg and st.stat.size == 0",
                                  "st.stat.checksum == 'da39a3ee5e6b4b0d3255bfef95601890afd80709'",
                                  "stl.stat.islnk and stl.stat.lnk_source == '" + str(t) + "'",
                                  "not nope.stat.exists"]}}]
    run = edge_target.play(tasks)
    assert run.rc == 0, run.out
    assert d.is_dir() and d.stat().st_mode & 0o777 == 0o750 and t.is_file() and link.is_symlink()
    again = edge_target.play(tasks[:3])
    # As ansible-core: touch is changed every time; directory and link are idempotent.
    assert [again.end(n)["status"] for n in ("dir", "touch", "link")] == ["ok", "changed", "ok"]
    gone = [{"name": "rm", "file": {"path": str(tmp_path / "d"), "state": "absent"}}]
    assert edge_target.play(gone, "--check").end("rm")["status"] == "changed" and d.exists()
    assert edge_target.play(gone).end("rm")["status"] == "changed" and not (tmp_path / "d").exists()
    assert edge_target.play(gone).end("rm")["status"] == "ok"


def test_file_absent_refuses_a_top_level_path_even_in_check_mode(edge_target: Target) -> None:
    run = edge_target.play([{"name": "rm", "file": {"path": "/usr", "state": "absent"}}], "--check")
    assert run.rc == 2
    assert run.end("rm")["status"] == "failed" and "refus" in run.end("rm")["msg"]


def test_lineinfile_add_replace_absent_insertafter_diff(edge_target: Target, tmp_path: Path) -> None:
    f = tmp_path / "env.conf"
    f.write_text("# header\nA=1\n")
    def li(name: str, **args: object) -> dict[str, object]:
        return {"name": name, "lineinfile": {"path": str(f), **args}}
    run = edge_target.play([li("add", line="x=1"), li("replace", regexp="^x=", line="x=2"),
                            li("same", regexp="^x=", line="x=2"), li("after", line="B=2", insertafter="^A=")])
    assert run.rc == 0, run.out
    assert [run.end(n)["msg"] for n in ("add", "replace", "same")] == ["line added", "line replaced", ""]
    assert [run.end(n)["status"] for n in ("add", "replace", "same", "after")] == \
        ["changed", "changed", "ok", "changed"]
    assert f.read_text() == "# header\nA=1\nB=2\nx=2\n"
    dry = edge_target.play([li("rm", regexp="^x=", state="absent")], "--check", "--diff")
    assert dry.end("rm")["msg"] == "would remove 1 line(s)" and "-x=2" in dry.out and "x=2" in f.read_text()
    assert edge_target.play([li("rm", regexp="^x=", state="absent")]).end("rm")["status"] == "changed"
    assert f.read_text() == "# header\nA=1\nB=2\n"
    missing = edge_target.play([{"name": "m", "lineinfile": {"path": str(tmp_path / "no"), "line": "a"}}])
    assert missing.rc == 2 and "does not exist" in missing.end("m")["msg"]


def test_wait_for_port_path_regex_and_timeout(edge_target: Target, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    # Port 1: nothing listens there, and outside the ephemeral range a retried connect can
    # never meet itself (TCP simultaneous open), which a just-freed high port sometimes does.
    free_port = 1
    log = tmp_path / "train.log"
    timer = threading.Timer(1.0, lambda: log.write_text("step 1\nREADY on 8080\n"))
    timer.start()
    try:
        run = edge_target.play([
            {"name": "open", "wait_for": {"port": port, "timeout": 10}},
            {"name": "closed", "wait_for": {"port": free_port, "state": "stopped", "timeout": 10}},
            {"name": "regex", "wait_for": {"path": str(log), "search_regex": "^READY on \\d+", "timeout": 30}},
            {"name": "too long", "wait_for": {"port": free_port, "timeout": 1}},
        ])
    finally:
        timer.cancel()
        listener.close()
    assert [run.end(n)["status"] for n in ("open", "closed", "regex")] == ["ok", "ok", "ok"], run.out
    assert run.end("regex")["data"]["elapsed"] < 30
    end = run.end("too long")
    assert end["status"] == "failed" and end["msg"] == f"Timeout when waiting for 127.0.0.1:{free_port}"
    assert 1 <= end["data"]["elapsed"] < 10


def test_gather_facts_through_the_agent(edge_target: Target) -> None:
    import getpass
    import socket

    run = edge_target.play([{"name": "g", "setup": {}},
                            {"name": "show", "debug": {"msg": "{{ ansible_hostname }}|{{ ansible_facts.user_id }}|"
                                                              "{{ ansible_nvidia_gpus | length >= 0 }}"}}])
    assert run.rc == 0, run.out
    assert run.end("show")["msg"] == f"{socket.gethostname().split('.')[0]}|{getpass.getuser()}|True"
