"""The README's five-minute tour, run as written: every quoted claim in its comments is part
of what that command prints, and the sample output is what a second restart prints, with only
what varies between runs normalised (VARYING). docs/getting-started.md repeats the tour
verbatim (tests/test_docs.py), so this checks it too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers import CliResult, cli_subprocess


def _tour() -> tuple[list[tuple[str, list[str]]], list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    commands_block, sample_block = re.findall(r"```(?:sh)?\n(.*?)\n```", section, re.S)[:2]
    steps: list[tuple[str, list[str]]] = []
    for line in commands_block.splitlines():
        code, _, comment = line.partition("#")
        if code.strip().startswith("opsrunner"):
            steps.append((code.strip(), []))
        if steps:
            steps[-1][1].extend(re.findall(r'"([^"]+)"', comment))
    return steps, sample_block.splitlines()


def _pattern(claim: str) -> str:
    return re.sub(r"\bN\b", r"\\d+(?:\\.\\d+)?", re.escape(claim))


#: What varies from one run to the next, and only that, becomes N: pids, durations and ages
#: (`up 7.3s`, `last grew 0.0s ago`), the log's size and the trainer's step, loss and
#: throughput (they depend on timing). Counts (files, bytes removed, the recap's ok=8) stay.
VARYING = (
    (r"\bpid \d+", "pid N"),
    (r"\bkilled (\d+): \d+", r"killed \1: N"),
    (r"\b\d+(?:\.\d+)?s\b", "Ns"),
    (r"\b\d+ bytes\b", "N bytes"),
    (r"\bstep \d+ loss [\d.]+ tokens/s \d+", "step N loss N tokens/s N"),
)


def _normal(line: str) -> str:
    # The stars after a task title fill its line to 80 columns; the title holds the home path.
    line = line.rstrip().rstrip("*").rstrip()
    for pattern, replacement in VARYING:
        line = re.sub(pattern, replacement, line)
    return line


def _sample_matches(sample: list[str], res: CliResult, home: Path) -> None:
    # The suite's own home directory stands where the sample shows /root.
    printed = [_normal(ln.replace(str(home), "/root")) for ln in res.out.splitlines()]
    for line in sample:
        want = _normal(line)
        if want.endswith("..."):
            assert any(p.startswith(want[:-3]) for p in printed), (line, printed)
        else:
            assert want in printed, (line, printed)



def test_readme_tour_prints_what_it_claims(home: Path) -> None:
    steps, sample = _tour()
    assert len(steps) >= 10 and all(claims for _, claims in steps)
    for i, (command, claims) in enumerate(steps):
        res = cli_subprocess(*shlex.split(command)[1:], env={"HOME": str(home)})
        output = res.out + res.err
        for claim in claims:
            assert re.search(_pattern(claim), output), f"{command!r} does not print {claim!r}:\n{output}"
        if i == 1:
            _sample_matches(sample, res, home)
