"""The command line's shared parts: the options several commands take (-i, -e, -l), declared
once with their help, and the help formatter. docs/cli.md's reference (docgen.py) follows the
formatter's rules, so that `--help` and the page say the same."""

from __future__ import annotations

import argparse
from typing import Any

INVENTORY_HELP = "inventory file or directory (default inventory/hosts.yml)"
EXTRA_VARS_HELP = "key=value pairs, a YAML/JSON mapping, or @file.yml (highest precedence)"
LIMIT_HELP = "further limit hosts with a pattern (a:b, a:&b, a:!b, globs)"


def add_inventory(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--inventory", action="append", default=[], metavar="INVENTORY", help=INVENTORY_HELP)


def add_extra_vars(p: argparse.ArgumentParser) -> None:
    p.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS", help=EXTRA_VARS_HELP)


def add_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("-l", "--limit", help=LIMIT_HELP)


def add_tags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--tags", action="append", default=[], help="only tasks with these tags, as `play -t`")
    p.add_argument("--skip-tags", action="append", default=[], help="skip tasks with these tags, as `play --skip-tags`")


def repeatable(action: argparse.Action) -> bool:
    """An option that may be given more than once, every value used (-i a -i b, -vvv)."""
    return isinstance(action, argparse._AppendAction | argparse._CountAction)


def help_text(action: argparse.Action) -> str:
    """An option's help as --help and docs/cli.md show it: a repeatable one says so."""
    text = action.help or ""
    return f"{text} (repeatable)" if text and text != argparse.SUPPRESS and repeatable(action) else text


class OptionalCommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands that the command runs without (`history` lists runs, `history prune` prunes
    them): its usage shows them in brackets. argparse writes `prune ...` for every subcommand
    action, which reads as required; the others (`opsrunner COMMAND`, `schedule add|...`) are."""


def optional_commands(p: argparse.ArgumentParser, **kwargs: Any) -> argparse._SubParsersAction[Any]:
    return p.add_subparsers(action=OptionalCommands, **kwargs)


class HelpFormatter(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str:
        return help_text(action)

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        text = super()._format_args(action, default_metavar)
        return f"[{text}]" if isinstance(action, OptionalCommands) else text
