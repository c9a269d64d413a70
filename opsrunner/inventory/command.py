"""`opsrunner inventory`: ansible-inventory's --list, --host and --graph (parsing and output)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO, Any

from opsrunner.cliopts import add_inventory
from opsrunner.errors import UsageError
from opsrunner.exitcodes import EXIT_OK


def register(sub: argparse._SubParsersAction[Any]) -> None:
    inv = sub.add_parser("inventory", help="show the inventory as ansible-inventory does (--list, --host, --graph)")
    inv.add_argument("group", nargs="?", default="all", metavar="GROUP", help="with --graph: the group to start at")
    add_inventory(inv)
    # One action of the three; checked after parsing, as ansible-inventory does, so that none or
    # several are a bad option (exit 5) and not a command line that does not parse (exit 2).
    inv.add_argument("--list", action="store_true", help="every group and host, with hostvars under _meta (JSON)")
    inv.add_argument("--host", metavar="HOST", help="the merged variables of one host")
    inv.add_argument("--graph", action="store_true", help="the group tree (from GROUP, default all)")
    inv.add_argument("--vars", action="store_true", help="with --graph: each host's and group's variables")
    inv.add_argument("-y", "--yaml", action="store_true", help="YAML instead of JSON (--list, --host)")
    inv.add_argument("--export", action="store_true",
                     help="with --list: each host's and group's own variables, not the merged ones")
    inv.add_argument("--show-secrets", action="store_true",
                     help="print secret values as written (default: masked, as in all opsrunner output)")
    inv.add_argument("-l", "--limit", help="with --list: only hosts matching this pattern")


def cmd_inventory(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner.inventory import load_inventory, localhost_inventory
    from opsrunner.inventory.listing import InventoryView, graph_inventory, list_inventory, show_host
    from opsrunner.project import default_inventory

    chosen = [name for name, given in (("--list", args.list), ("--host", args.host is not None),
                                        ("--graph", args.graph)) if given]
    if not chosen:
        raise UsageError("No action selected, at least one of --host, --graph or --list needs to be specified.")
    if len(chosen) > 1:
        raise UsageError(f"Conflicting options used ({' '.join(chosen)}), only one of --host, --graph or --list "
                         "can be used at the same time.")
    sources: list[Path | str] = [*args.inventory] or [default_inventory(Path.cwd())]
    inventory = load_inventory(sources) if args.inventory or Path(sources[0]).exists() else localhost_inventory()
    view = InventoryView.of(inventory, export=args.export, show_secrets=args.show_secrets)
    if args.host is not None:
        out.write(show_host(view, args.host, yaml=args.yaml))
    elif args.graph:
        out.write(graph_inventory(view, args.group, with_vars=args.vars))
    else:
        out.write(list_inventory(view, limit=args.limit, yaml=args.yaml))
    return EXIT_OK
