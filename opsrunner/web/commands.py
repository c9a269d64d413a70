"""`opsrunner serve`: argument parsing and the server's start. Starlette and uvicorn are the
`web` extra, imported only here, when the dashboard starts."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path
from typing import IO, Any

from opsrunner.errors import CommandError, UsageError

DEFAULT_PORT = 8765


def register(sub: argparse._SubParsersAction[Any]) -> None:
    serve = sub.add_parser("serve", help="a read-only web dashboard over the run history and the schedules")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1; one not of loopback needs --token-file)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    serve.add_argument("--history", metavar="PATH",
                       help="history: a SQLite file or a postgresql:// URL (default $OPSRUNNER_HISTORY or "
                            "~/.local/state/opsrunner/history.db)")
    serve.add_argument("--schedules", metavar="DIR", help="schedule files folder (default $OPSRUNNER_SCHEDULES "
                       "or ~/.config/opsrunner/schedules)")
    serve.add_argument("--token-file", metavar="FILE",
                       help="a file holding the token every request must carry (Authorization: Bearer TOKEN)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"--token-file {path}: {exc.strerror}") from None
    if len(token) < 16:
        raise UsageError(f"--token-file {path}: the token must be at least 16 characters")
    return token


def cmd_serve(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner.history.backend import NoHistory
    from opsrunner.history.location import display, resolve
    from opsrunner.history.store import HistoryStore
    from opsrunner.schedule.store import schedules_dir

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be 0..65535")
    token = read_token(args.token_file) if args.token_file else None
    if token is None and not is_loopback(args.host):
        raise UsageError(f"--host {args.host} is not a loopback address: the dashboard shows command lines "
                         "and logs, so it needs --token-file there")
    try:
        import uvicorn

        from opsrunner.web.app import Dashboard, create_app
    except ImportError as exc:
        raise CommandError(f"the dashboard needs the web extra ({exc.name} is missing): "
                           "pip install '.[web]' in the opsrunner checkout") from None
    history = resolve(args.history)
    shown = display(history)
    try:  # migrated to this version once, here; every request only reads it
        HistoryStore(history, create=False).close()
    except NoHistory as exc:  # never created here (a run does): a mistyped path is told at once
        shown += f", which does not exist ({exc}): no run is shown until a run records there"
    except Exception as exc:
        from opsrunner.history.location import scrub

        cause = scrub(f"{type(exc).__name__}: {exc}", history)
        raise CommandError(f"cannot open the run history {display(history)}: {cause}") from None
    app = create_app(Dashboard(history, schedules_dir(args.schedules), token))
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    return _serve(server, args.host, args.port, shown, out)


def _serve(server: Any, host: str, port: int, history: str, out: IO[str]) -> int:
    """Listen (port 0: any free one), print the address, then serve until SIGINT or SIGTERM."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)  # connections queue from now on, before uvicorn serves them
    except OSError as exc:
        sock.close()
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    shown = f"[{host}]" if ":" in host else host
    out.write(f"opsrunner dashboard on http://{shown}:{sock.getsockname()[1]}/ (history {history}); "
              "Ctrl-C stops it\n")
    out.flush()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
