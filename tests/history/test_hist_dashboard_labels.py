"""docs/dashboard.md lists every result label the dashboard shows: each one the code can
make (every exit code with a word of its own, the outcomes recorded for runs that never
began, running, aborted, dry runs, incomplete records), and those of real runs."""

from __future__ import annotations

import re
from pathlib import Path

from opsrunner.history.rows import EXIT_RESULTS, RESULTS, RunRow
from opsrunner.history.store import HistoryStore, RunFilter
from opsrunner.web.data import runs_page
from tests.conftest import ROOT, write_yaml
from tests.helpers import cli_subprocess

DOC = ROOT / "docs" / "dashboard.md"


def documented() -> str:
    """The page's text with its line breaks as spaces (a label may wrap)."""
    return re.sub(r"\s+", " ", DOC.read_text())


def labels_the_code_makes() -> set[str]:
    rows = [RunRow(id="r", started=0.0, exit_code=code) for code in [*EXIT_RESULTS, 250]]
    rows += [RunRow(id="r", started=0.0, exit_code=2, outcome="refused"),
             RunRow(id="r", started=0.0, exit_code=1, outcome="no hosts"),
             RunRow(id="r", started=0.0), RunRow(id="r", started=0.0, aborted=True),
             RunRow(id="r", started=0.0, exit_code=0, check_mode=True),
             RunRow(id="r", started=0.0, exit_code=2, check_mode=True),
             RunRow(id="r", started=0.0, exit_code=0, record_gap="0 of 3 task results recorded")]
    return {r.label for r in rows}


def test_every_label_the_code_makes_is_documented() -> None:
    text = documented()
    missing = sorted(label for label in labels_the_code_makes() if f"`{label}`" not in text)
    assert missing == [], f"labels the dashboard shows that {DOC.name} does not list: {missing}"
    assert {"ok, record incomplete", "aborted (controller gone)", "bad input (exit 4)", "refused (exit 2)",
            "unreachable (exit 3)", "terminated (exit 143)", "dry run failed (exit 2)"} <= labels_the_code_makes()
    for name in RESULTS:  # the result filter's values
        assert f"`{name}`" in text


def test_the_labels_of_real_runs_are_documented(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    write_yaml(proj / "inv.yml", {"all": {"hosts": {
        "h1": {"connection": "local"},
        "gone": {"connection": "ssh", "host": "127.0.0.1", "port": 9, "connect_timeout": 2}}}})
    write_yaml(proj / "ok.yml", [{"hosts": "h1", "gather_facts": False, "tasks": [{"command": "true"}]}])
    write_yaml(proj / "fails.yml", [{"hosts": "h1", "gather_facts": False, "tasks": [{"command": "false"}]}])
    write_yaml(proj / "far.yml", [{"hosts": "gone", "gather_facts": False, "tasks": [{"command": "true"}]}])
    (proj / "broken.yml").write_text("- hosts: all\n  tasks: [\n")
    db = tmp_path / "h.db"
    codes = []
    for args in (["ok.yml"], ["ok.yml", "--check"], ["fails.yml"], ["far.yml"], ["broken.yml"],
                 ["ok.yml", "-l", "typo"]):
        codes.append(cli_subprocess("play", *args, "-i", "inv.yml", cwd=proj, env={"OPSRUNNER_HISTORY": str(db)}).rc)
    assert codes == [0, 0, 2, 3, 4, 1]
    store = HistoryStore(db)
    labels = [r["label"] for r in runs_page(store, RunFilter(), 1)["runs"]]
    store.close()
    assert labels == ["no hosts (exit 1)", "bad input (exit 4)", "unreachable (exit 3)", "failed (exit 2)",
                      "dry run", "ok"]
    text = documented()
    assert [label for label in labels if f"`{label}`" not in text] == []
