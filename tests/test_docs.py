"""The documentation site builds with `mkdocs build --strict` and no warning; its generated
command-line reference matches the argument parser; README stays short and points at it."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from opsrunner.cli import build_parser
from opsrunner.docgen import CLI_BEGIN, CLI_END, cli_reference, commands, module_reference, section
from tests.conftest import ROOT

DOCS = ROOT / "docs"


def test_site_builds_strict_without_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # The theme prints a notice about its future that is no warning of this site's.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(site)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert not [line for line in output.splitlines() if "WARNING" in line], output
    cli_page = (site / "cli" / "index.html").read_text()
    assert "opsrunner schedule add" in cli_page and "--json-events" in cli_page
    assert "clear_cache" in (site / "modules" / "index.html").read_text()


def _nav_files(entries: list[object]) -> list[str]:
    found: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += _nav_files(value) if isinstance(value, list) else [str(value)]
    return found


def test_nav_holds_every_page_once_and_only_pages_that_exist() -> None:
    nav = _nav_files(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert len(nav) == len(set(nav))
    assert set(nav) == {p.name for p in DOCS.glob("*.md")}
    for stub in ("scale-out.md", "become.md", "ansible-differences.md", "architecture.md"):
        assert stub in nav


def test_cli_reference_is_fresh() -> None:
    page = (DOCS / "cli.md").read_text()
    assert section(page, CLI_BEGIN, CLI_END) == cli_reference().strip("\n"), \
        "docs/cli.md's reference is stale: run python -m opsrunner.docgen --write"


def test_cli_reference_has_every_subcommand_and_every_flag() -> None:
    reference = cli_reference()
    parts = re.split(r"^### `opsrunner ([a-z -]+)`$", reference, flags=re.M)
    by_command = dict(zip(parts[1::2], parts[2::2], strict=True))
    every = list(commands(build_parser()))
    assert {"play", "check", "logs", "schema", "history", "history prune", "show", "schedule add",
            "schedule list", "schedule remove", "schedule run", "serve"} <= {" ".join(c.path) for c in every}
    for command in every:
        text = by_command[" ".join(command.path)]
        for action in command.parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            for flag in action.option_strings:
                assert re.search(rf"`[^`]*(?<![\w-]){re.escape(flag)}(?![\w-])[^`]*`", text), (command.path, flag)
    assert "| `--version` |" in reference


def test_docgen_write_refreshes_stale_pages(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for name in ("cli.md", "modules.md"):
        page = (DOCS / name).read_text()
        stale = re.sub(r"(<!-- BEGIN [A-Z ]+ REFERENCE .*?-->\n).*?(<!-- END)", r"\1old\n\2", page, flags=re.S)
        assert stale != page
        (tmp_path / "docs" / name).write_text(stale)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "opsrunner.docgen", "--write"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    refreshed = (tmp_path / "docs" / "cli.md").read_text()
    assert section(refreshed, CLI_BEGIN, CLI_END) == cli_reference().strip("\n")
    assert section((tmp_path / "docs" / "modules.md").read_text()) == module_reference().strip("\n")
    assert refreshed == (DOCS / "cli.md").read_text()


def test_readme_is_short_and_its_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 400
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 14
    for link in local:
        assert (ROOT / link).exists(), link


def _blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n.*?\n```", text, re.S)


def test_getting_started_repeats_the_readme_commands_and_tour_verbatim() -> None:
    """Every command and sample output block: the README's tests (test_product, test_readme_tour)
    then cover the page as well. The prose around them may link differently."""
    readme = (ROOT / "README.md").read_text()
    page = (DOCS / "getting-started.md").read_text()
    for heading in ("## Two commands", "## A five-minute tour"):
        readme_part = readme.split(heading, 1)[1].split("\n## ", 1)[0]
        page_part = page.split(heading, 1)[1].split("\n## ", 1)[0]
        assert _blocks(readme_part) == _blocks(page_part) and _blocks(page_part), heading


def test_what_issue_30_found_stays_fixed() -> None:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version
    for path in [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", *DOCS.glob("*.md")]:
        for rev in re.findall(r"\brev:\s*(\S+)", path.read_text()):
            assert not re.fullmatch(r"v?\d+(\.\d+)*", rev) or rev.lstrip("v") == version[1], (path, rev)
    ansible = (DOCS / "ansible.md").read_text()
    safety = (DOCS / "safety.md").read_text()
    for heading in ("## What is refused", "## What is never killed", "## What is masked", "## What is bounded"):
        assert heading in safety and heading not in ansible, heading
