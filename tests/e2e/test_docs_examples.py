"""Examples in the documentation, run as written: the preflight example of docs/concepts.md
(its playbook and inventory blocks become files, its `$ opsrunner ...` lines are run, and every
line it shows is printed, in order)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers import cli_subprocess


def _preflight_example() -> tuple[str, str, list[tuple[str, list[str]]]]:
    text = (ROOT / "docs" / "concepts.md").read_text()
    part = text.split("### Preflight", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"^```(\w*)\n(.*?)\n```$", part, re.S | re.M)
    playbook, inventory = [body for lang, body in blocks if lang == "yaml"]
    (transcript,) = [body for lang, body in blocks if not lang and body.startswith("$ opsrunner")]
    runs: list[tuple[str, list[str]]] = []
    for line in transcript.splitlines():
        if line.startswith("$ "):
            runs.append((line[2:], []))
        else:
            runs[-1][1].append(line)
    return playbook, inventory, runs


def _normal(line: str) -> str:
    # A task title's stars fill its line to 80 columns; nothing else is normalised.
    return line.rstrip().rstrip("*").rstrip()


def test_the_preflight_example_prints_what_it_shows(tmp_path: Path) -> None:
    playbook, inventory, runs = _preflight_example()
    assert [command.split()[:2] for command, _ in runs] == [["opsrunner", "check"], ["opsrunner", "play"]]
    # The pidfile the example names is moved into this test's own directory (the output never
    # shows it): no file outside it is read or written.
    (tmp_path / "pb.yml").write_text(playbook.replace("/tmp/train.pid", str(tmp_path / "train.pid")))
    (tmp_path / "inv.yml").write_text(inventory)
    env = {"HOME": str(tmp_path), "OPSRUNNER_HISTORY": str(tmp_path / "history.db")}
    exit_codes = []
    for command, shown in runs:
        res = cli_subprocess(*shlex.split(command)[1:], cwd=tmp_path, env=env)
        exit_codes.append(res.rc)
        # The test's directory stands where the example's /tmp/train.pid puts the job lock.
        output = (res.err + res.out).replace(str(tmp_path), "/tmp")
        printed = [_normal(line) for line in output.splitlines()]
        at = 0
        for line in (_normal(s) for s in shown if s != "..."):
            assert line in printed[at:], f"{command!r} does not print {line!r} after line {at}:\n" + "\n".join(printed)
            at = printed.index(line, at) + (1 if line else 0)
    assert exit_codes == [4, 2]  # the same mistake on every host: 4; on one host: that host fails
