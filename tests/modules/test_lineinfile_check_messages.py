"""lineinfile under -C (and -C -D) says what it would do, as copy says `would write`: the agent's
`line replaced` would claim an edit that was not made. What it reports as changed stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.modules.conftest import Target, _target_for


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return _target_for("local", request, tmp_path)


@pytest.mark.parametrize("flags", [("--check",), ("--check", "--diff")], ids=["-C", "-C -D"])
def test_check_mode_messages_say_what_would_happen(target: Target, tmp_path: Path, flags: tuple[str, ...]) -> None:
    f = tmp_path / "env.conf"
    f.write_text("A=1\nx=1\n")

    def li(name: str, **args: object) -> dict[str, object]:
        return {"name": name, "lineinfile": {"path": str(f), **args}}

    run = target.play([li("replace", regexp="^x=", line="x=2"), li("add", line="y=2"),
                       li("remove", regexp="^A=", state="absent"), li("same", line="A=1")], *flags)
    assert run.rc == 0, run.out
    assert [run.end(n)["msg"] for n in ("replace", "add", "remove", "same")] == \
        ["would replace the line", "would add the line", "would remove 1 line(s)", ""]
    assert [run.end(n)["status"] for n in ("replace", "add", "remove", "same")] == \
        ["changed", "changed", "changed", "ok"]
    assert "changed: [target] => would replace the line" in run.out
    assert f.read_text() == "A=1\nx=1\n"
    if "--diff" in flags:
        assert "-x=1\n+x=2" in run.out


def test_a_real_run_still_says_what_it_did(target: Target, tmp_path: Path) -> None:
    f = tmp_path / "env.conf"
    f.write_text("A=1\nx=1\n")
    run = target.play([{"name": "replace", "lineinfile": {"path": str(f), "regexp": "^x=", "line": "x=2"}}])
    assert run.rc == 0 and run.end("replace")["msg"] == "line replaced"
    assert f.read_text() == "A=1\nx=2\n"
