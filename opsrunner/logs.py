"""`opsrunner logs`: the job log's last lines of the latest run, per host, through the same
connection and wrapper chain as a play; `--follow` polls for what is appended.

Where the log is comes from a playbook's play (default: the project's status.yml, so the
role's `log_path` as the inventory sets it), or from `--log PATH`. Following is a short
agent call per host each second, so Ctrl-C leaves nothing running on any host.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from opsrunner.cliopts import add_extra_vars, add_inventory
from opsrunner.connections.base import Connection
from opsrunner.connections.factory import ConnectionFactory
from opsrunner.connections.ops import TAIL
from opsrunner.errors import ConnectionFailed, ModuleFailure, OpsrunnerError, TemplateError
from opsrunner.results import Status

if TYPE_CHECKING:
    from opsrunner.playrequest import RunInputs
    from opsrunner.remote.protocol_files import TailArgs, TailReply

POLL_S = 1.0
EXIT_FAILED, EXIT_UNREACHABLE = 2, 3
AGENT_TIMEOUT_S = 30.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("logs", help="print the job log's last lines per host (--follow to stream)")
    add_inventory(p)
    p.add_argument("-l", "--limit", help="only hosts matching this pattern")
    p.add_argument("-n", "--lines", type=int, default=20, help="how many last lines (default 20)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    p.add_argument("--log", help="the log's path on the hosts (default: the play's log_path)")
    p.add_argument("--playbook", default="status.yml",
                   help="the play whose hosts and variables (log_path, pidfile) are used (default status.yml)")
    add_extra_vars(p)


@dataclass
class Source:
    """One host's log: where it is, and how to reach the host."""

    host: str
    connection: Connection
    log: str
    pidfile: str | None
    end: int = 0
    partial: str = ""
    follow: bool = False


def run_logs(args: argparse.Namespace, out: IO[str], inputs: RunInputs) -> int:
    """`inputs`: the playbook, inventory and options loaded as for `play` (api.load)."""
    from opsrunner.targets import require_targets

    playbook, inventory, options = inputs.playbook, inputs.inventory, inputs.options
    require_targets(playbook, inventory, options)
    if args.lines < 0:
        raise OpsrunnerError("--lines must be 0 or more")
    factory = ConnectionFactory()
    codes: list[int] = []
    try:
        sources, unknown = _sources(playbook, inventory, options, args, factory, out)
        codes += [EXIT_FAILED] * unknown
        for src in sources:
            codes.append(_print_tail(src, args.lines, out))
        if args.follow:
            _follow([s for s in sources if s.end >= 0], out)
    except KeyboardInterrupt:
        pass  # the normal end of --follow; nothing runs on the hosts between polls
    finally:
        factory.close_all()
    # As a play's: 3 when a host was unreachable, else 2 when a host had no log to show.
    return max(codes, default=0)


def _sources(playbook: Any, inventory: Any, options: Any, args: argparse.Namespace,
             factory: ConnectionFactory, out: IO[str]) -> tuple[list[Source], int]:
    from opsrunner.hostvars import VariableManager, connection_spec
    from opsrunner.selection import select_play_hosts
    from opsrunner.templating import render

    manager = VariableManager(inventory, options.extra_vars, False)
    sources: list[Source] = []
    failed = 0
    for play in playbook.plays:
        hosts = select_play_hosts(play, inventory, options)
        for host in hosts:
            if any(s.host == host for s in sources):
                continue
            variables = manager.for_task(play, None, host, hosts)
            try:
                log = args.log or str(render("{{ log_path }}", variables))
                pidfile = str(render("{{ pidfile | default('') }}", variables)) or None
                conn = factory.get(connection_spec(host, variables))
            except TemplateError as exc:
                out.write(f"{host} | cannot tell where the log is: {exc} (use --log PATH)\n")
                failed += 1
                continue
            sources.append(Source(host, conn, log, pidfile, follow=args.follow))
    return sources, failed


def _agent(conn: Connection, request: TailArgs) -> TailReply:
    reply = conn.agent().request(TAIL, request, timeout=AGENT_TIMEOUT_S)
    if reply.get("error"):
        raise ModuleFailure(str(reply["error"]))
    return reply


def _print_tail(src: Source, lines: int, out: IO[str]) -> int:
    """Print one host's tail; its exit code (0, or EXIT_FAILED / EXIT_UNREACHABLE)."""
    try:
        reply = _agent(src.connection, {"log": src.log, "pidfile": src.pidfile, "lines": lines})
    except (ConnectionFailed, ModuleFailure) as exc:
        out.write(f"{src.host} | {Status.UNREACHABLE if isinstance(exc, ConnectionFailed) else 'error'}: {exc}\n")
        src.end = -1
        return EXIT_UNREACHABLE if isinstance(exc, ConnectionFailed) else EXIT_FAILED
    if reply.get("missing"):
        out.flush()
        if src.follow:  # a job about to start: followed, its log is waited for
            out.write(f"{src.host} | (no log at {src.log} yet: waiting for it)\n")
            return 0
        out.write(f"{src.host} | ERROR: no log at {src.log} (not created yet, or another path)\n")
        return EXIT_FAILED
    for line in str(reply.get("text", "")).splitlines():
        out.write(f"{src.host} | {line}\n")
    out.flush()
    src.end = int(reply.get("end", 0))
    return 0


def _follow(sources: list[Source], out: IO[str]) -> None:
    while sources:
        time.sleep(POLL_S)
        for src in sources:
            try:
                reply = _agent(src.connection, {"log": src.log, "since": src.end})
            except (ConnectionFailed, ModuleFailure) as exc:
                out.write(f"{src.host} | error: {exc}\n")
                continue
            if reply.get("skipped"):
                out.write(f"{src.host} | ... {reply['skipped']} bytes skipped ...\n")
            lines = (src.partial + str(reply.get("text", ""))).split("\n")
            src.partial = lines.pop()  # an unfinished last line waits for its newline
            for line in lines:
                out.write(f"{src.host} | {line}\n")
            src.end = int(reply.get("end", src.end))
        out.flush()

