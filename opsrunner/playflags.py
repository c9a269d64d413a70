"""`opsrunner play` options with ansible-playbook's meaning: --start-at-task, --step, -u,
--private-key, -c and --syntax-check (parsing only; startat.py and connections/defaults.py
do the work)."""

from __future__ import annotations

import argparse
from typing import Any


def add_play_flags(play: argparse.ArgumentParser) -> None:
    play.add_argument("--start-at-task", metavar="NAME",
                      help="start at the first task of this name (or glob); the tasks before it are skipped")
    play.add_argument("--step", action="store_true",
                      help="ask before each task: (N)o/(y)es/(c)ontinue (needs a terminal)")
    play.add_argument("-u", "--user", metavar="USER", help="ssh user of hosts whose vars set none")
    play.add_argument("--private-key", "--key-file", dest="private_key", metavar="FILE",
                      help="ssh private key of hosts whose vars set none")
    play.add_argument("-c", "--connection", metavar="TYPE",
                      help="connection type of hosts whose vars set none: local or ssh")
    play.add_argument("--syntax-check", action="store_true",
                      help="validate the playbook and inventory as `opsrunner check` does; touch no host")


def play_flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The PlayRequest fields these options set (absent on commands that lack them)."""
    return {"start_at_task": getattr(args, "start_at_task", None), "step": getattr(args, "step", False),
            "user": getattr(args, "user", None), "private_key": getattr(args, "private_key", None),
            "connection": getattr(args, "connection", None)}
