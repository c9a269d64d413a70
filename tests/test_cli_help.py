"""What `--help` says: usage lines true to what each command accepts, the options that several
commands share explained as `play` explains them, and repeatable options said to be (as
docs/cli.md, generated from the same parser, says)."""

from __future__ import annotations

import argparse
import re
from itertools import takewhile
from pathlib import Path

import pytest

from opsrunner.cli import build_parser
from opsrunner.docgen import commands
from opsrunner.history.store import HistoryStore
from tests.conftest import ROOT
from tests.helpers import cli

#: argparse's help column: an option's help goes on, or continues on, lines indented this far.
HELP_COLUMN = 24


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one usage line, and help lines wrapped the same every time


def _help(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    assert cli(*command, "--help").rc == 0
    return capsys.readouterr().out


def _usage(text: str) -> str:
    return " ".join(text.split("\n\n", 1)[0].split())


def _option_help(text: str, invocation: str) -> str:
    """The help `--help` prints for the option shown as `invocation` (`-e VARS, --extra-vars VARS`)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(invocation + " ") or
              line.strip() == invocation)
    first = lines[at].strip()[len(invocation):]
    more = takewhile(lambda line: line.startswith(" " * HELP_COLUMN), lines[at + 1:])
    return " ".join(" ".join([first, *more]).split())


def test_history_usage_shows_its_prune_subcommand_as_optional(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    usage = _usage(_help(capsys, "history"))
    assert usage.endswith("[--history PATH_OR_URL] [prune ...]"), usage
    # what the usage says: `history` alone runs (lists runs), and `history prune` is a command
    HistoryStore(tmp_path / "h.db").close()  # a history a run made: a reader creates none
    assert cli("history", "--history", str(tmp_path / "h.db")).rc == 0
    assert _usage(_help(capsys, "history", "prune")).startswith("usage: opsrunner history prune [-h] --keep-days N")


def test_commands_that_need_a_subcommand_still_show_it_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(_help(capsys)) == "usage: opsrunner [-h] [--version] COMMAND ..."
    assert _usage(_help(capsys, "schedule")) == "usage: opsrunner schedule [-h] add|list|remove|run ..."
    # a command line without its command does not parse: exit 2, as argparse's own errors
    # (and ansible-playbook's), not 5 (options that parse but cannot be used)
    bare, schedule = cli(), cli("schedule")
    assert (bare.rc, schedule.rc) == (2, 2), (bare.err, schedule.err)
    assert "a command is required (play, check" in bare.err
    assert "a subcommand is required (add, list, remove, run)" in schedule.err


SHARED = {("check",): ("-i INVENTORY, --inventory INVENTORY", "-e VARS, --extra-vars VARS"),
          ("logs",): ("-i INVENTORY, --inventory INVENTORY", "-e VARS, --extra-vars VARS"),
          ("schedule", "add"): ("-i INVENTORY, --inventory INVENTORY", "-e VARS, --extra-vars VARS",
                                "-l LIMIT, --limit LIMIT")}


@pytest.mark.parametrize("command", list(SHARED), ids=" ".join)
def test_shared_options_have_plays_help(capsys: pytest.CaptureFixture[str], command: tuple[str, ...]) -> None:
    play = _help(capsys, "play")
    text = _help(capsys, *command)
    for invocation in SHARED[command]:
        explained = _option_help(play, invocation)
        assert explained and _option_help(text, invocation) == explained, (command, invocation)


def test_every_option_of_every_command_has_help() -> None:
    blank = [(c.path, a.option_strings) for c in commands(build_parser()) for a in c.parser._actions
             if a.option_strings and not a.help and not isinstance(a, argparse._HelpAction)]
    assert blank == []


def test_inventory_is_repeatable_and_help_and_docs_say_so(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yml").write_text(f"all:\n  hosts:\n    host_{name}: {{ansible_connection: local}}\n")
    (tmp_path / "p.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - debug: {msg: hi}\n")
    listed = cli("play", "p.yml", "-i", "a.yml", "-i", "b.yml", "--list-hosts", cwd=tmp_path)
    assert listed.rc == 0 and "host_a" in listed.out and "host_b" in listed.out  # every -i is read
    said = _option_help(_help(capsys, "play"), "-i INVENTORY, --inventory INVENTORY")
    assert said == "inventory file or directory (default inventory/hosts.yml) (repeatable)"
    page = (ROOT / "docs" / "cli.md").read_text()
    play = page.split("### `opsrunner play`", 1)[1].split("### ", 1)[0]
    assert f"| `-i, --inventory` | `INVENTORY` |  | {said} |" in play
    assert not re.search(r"repeatable\W+\(repeatable\)", page)
