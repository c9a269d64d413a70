"""Markdown tables in docs/ render as tables: no row stranded after a paragraph (where Markdown
reads it as the paragraph's text), and the exit-code table lists every exit code."""

from __future__ import annotations

import re
from pathlib import Path

import markdown

from opsrunner import exitcodes
from tests.conftest import ROOT

DOCS = ROOT / "docs"


def _stray_rows(text: str) -> list[str]:
    """Table rows (`| ... |`) that Markdown renders as a paragraph's text, not in a table."""
    html = markdown.markdown(text, extensions=["tables", "attr_list", "admonition", "pymdownx.superfences"])
    paragraphs = re.findall(r"<p>(.*?)</p>", html, flags=re.S)
    return [line for p in paragraphs for line in p.splitlines() if re.match(r"\s*\|.*\|\s*$", line)]


def test_no_docs_page_has_a_table_row_after_a_paragraph() -> None:
    stray = {page.name: rows for page in sorted(DOCS.glob("*.md")) if (rows := _stray_rows(page.read_text()))}
    assert stray == {}


def _exit_code_table(page: Path) -> list[int]:
    """The codes of the first table under `## Exit codes`, up to the first line that is no row."""
    section = page.read_text().split("## Exit codes\n", 1)[1]
    rows = section.lstrip("\n").splitlines()
    table = rows[:next(i for i, line in enumerate(rows) if not line.startswith("|"))]
    return [int(m.group(1)) for line in table if (m := re.match(r"\| (\d+) \|", line))]


def test_the_exit_code_table_holds_every_code_in_one_table() -> None:
    codes = _exit_code_table(DOCS / "cli.md")
    constants = {v for k, v in vars(exitcodes).items() if k.startswith("EXIT_") and isinstance(v, int)}
    assert constants <= set(codes), sorted(constants - set(codes))
    assert codes == [0, 1, 2, 3, 4, 5, 99, 143, 250]
