"""Command line: argument parsing, output and exit codes. Runs go through the library (api.py)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from typing import IO, TYPE_CHECKING, Any, NoReturn, cast

from opsrunner import __version__
from opsrunner.cliopts import HelpFormatter, add_extra_vars, add_inventory, add_limit
from opsrunner.connections.startslots import DEFAULT_START_SLOTS
from opsrunner.errors import ArgumentsError, OpsrunnerError, Problem, SourcePos, Terminated, UsageError, ValidationError
from opsrunner.exitcodes import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_UNEXPECTED,
    EXIT_VALIDATION,
)
from opsrunner.interrupts import hangup_drops_output
from opsrunner.outstream import QuietWhenClosed
from opsrunner.playflags import add_play_flags, play_flag_values

#: A command other than a run whose output could not be written all (a full disk): as coreutils.
EXIT_OUTPUT_CUT = 1

if TYPE_CHECKING:
    from opsrunner.becomeopts import BecomeDefaults
    from opsrunner.events import Reporter
    from opsrunner.playrequest import PlayRequest


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ArgumentsError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="opsrunner", description="Declarative restarts of long-running jobs "
                     "on remote hosts, over ssh and container exec hops.")
    parser.add_argument("--version", action="version", version=f"opsrunner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    play = sub.add_parser("play", help="run a playbook")
    _common(play)
    add_extra_vars(play)
    add_limit(play)
    play.add_argument("-t", "--tags", action="append", default=[], help="only tasks with these tags")
    play.add_argument("--skip-tags", action="append", default=[], help="skip tasks with these tags")
    play.add_argument("-C", "--check", action="store_true", help="dry run: change nothing")
    play.add_argument("-D", "--diff", action="store_true", help="show content changes")
    play.add_argument("--force-handlers", action="store_true", help="run notified handlers even on failed hosts")
    play.add_argument("-f", "--forks", type=int, default=10, help="hosts in parallel (default 10)")
    play.add_argument("--connect-slots", type=int, default=DEFAULT_START_SLOTS, metavar="N",
                      help=f"hosts connecting and starting their agent at once (default {DEFAULT_START_SLOTS}); "
                      "connect_timeout counts from a host's turn")
    play.add_argument("--ssh-workers", type=int, default=None, metavar="N",
                      help="processes that hold the ssh connections beside the engine (0: none; default: "
                      "by hosts and cores, none below 8 cores or 16 ssh hosts)")
    play.add_argument("-v", "--verbose", action="count", default=0,
                      help="more output; -vvv prints every command exactly as sent")
    play.add_argument("--json-events", metavar="FILE", help="write JSON Lines events to FILE ('-' = stdout)")
    play.add_argument("--list-tasks", action="store_true", help="list tasks and exit (no connection)")
    play.add_argument("--list-tags", action="store_true",
                      help="list each play's tags and its selected tasks' tags and exit (no connection)")
    play.add_argument("--list-hosts", action="store_true", help="list hosts per play and exit (no connection)")
    play.add_argument("--no-color", action="store_true", help="no ANSI colours")
    play.add_argument("--lock", action="store_true",
                      help="refuse to start while another run of this playbook+inventory is running here")
    play.add_argument("--no-history", action="store_true", help="do not record this run in the run history")
    play.add_argument("--history", metavar="PATH_OR_URL", help="run history: a SQLite file or postgresql://user@host"
                      ":port/db (default $OPSRUNNER_HISTORY or ~/.local/state/opsrunner/history.db)")
    play.add_argument("--history-required", action="store_true",
                      help="stop before any host is touched (exit 1) when the history cannot be written")
    play.add_argument("--slice", metavar="I/N", dest="host_slice",
                      help="run only slice I of N of the hosts (by a hash of each name; docs/scale-out.md)")
    play.add_argument("--run-group", metavar="ID", help="the group that ties the slices of one run together in "
                      "the history (default $OPSRUNNER_RUN_GROUP, or derived for a sliced run)")
    add_play_flags(play)
    _become_flags(play)

    check = sub.add_parser("check", help="validate a playbook and inventory; touch no host")
    _common(check)
    add_extra_vars(check)
    check.add_argument("-l", "--limit", help="further limit hosts with a pattern, as `play -l`: one that leaves "
                       "no host is a problem (exit 4)")
    check.add_argument("-t", "--tags", action="append", default=[], help="only tasks with these tags, as `play -t`")
    check.add_argument("--skip-tags", action="append", default=[], help="skip tasks with these tags")

    from opsrunner.logs import add_parser as add_logs_parser

    add_logs_parser(sub)

    schema = sub.add_parser("schema", help="print a JSON Schema (for editors / yaml-language-server)")
    schema.add_argument("name", nargs="?", default="playbook",
                        help="playbook, inventory, a module name, or 'list'")
    from opsrunner.history.views import register as register_history
    from opsrunner.inventory.command import register as register_inventory
    from opsrunner.schedule.commands import register as register_schedule
    from opsrunner.web.commands import register as register_serve

    register_history(sub)
    register_inventory(sub)
    register_schedule(sub)
    register_serve(sub)
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("playbook", help="playbook file; a bare name is looked up here, then in playbooks/")
    add_inventory(p)


def _become_flags(p: argparse.ArgumentParser) -> None:
    """-b, --become-user, --become-method, -K: defaults that a play's or task's keywords override."""
    p.add_argument("-b", "--become", action="store_true", default=None,
                   help="run tasks with become (a play's or task's `become` overrides it)")
    p.add_argument("--become-user", metavar="USER", help="the user to become (default root)")
    p.add_argument("--become-method", choices=("sudo", "su"), help="how to become (default sudo)")
    p.add_argument("-K", "--ask-become-pass", action="store_true",
                   help="ask for the become password on the terminal (a become_password variable wins)")


def _become(args: argparse.Namespace) -> BecomeDefaults:
    """The become defaults the command line gives; -K reads the password from the terminal."""
    from opsrunner.becomeopts import BecomeDefaults

    password = _ask_become_pass() if getattr(args, "ask_become_pass", False) else None
    return BecomeDefaults(become=bool(getattr(args, "become", False)), user=getattr(args, "become_user", None),
                          method=getattr(args, "become_method", None), password=password)


def _ask_become_pass() -> str:
    import getpass
    import os

    try:  # getpass falls back to stdin without a terminal; a run must never wait on that
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        raise ValidationError([Problem(SourcePos("-K/--ask-become-pass"), "no terminal to read the become "
                                       "password from; set become_password in a vars file (-e @FILE) or the "
                                       "inventory instead")]) from None
    return getpass.getpass("BECOME password: ")


def _request(args: argparse.Namespace, ask_become_pass: bool = True) -> PlayRequest:
    """The library's request for what the command line asks (play, check and logs);
    `ask_become_pass` False: without -K's password (never asked)."""
    from opsrunner.becomeopts import BecomeDefaults
    from opsrunner.playrequest import PlayRequest

    return PlayRequest(
        playbook=args.playbook, inventory=args.inventory, extra_vars=args.extra_vars,
        limit=getattr(args, "limit", None), tags=getattr(args, "tags", ()), skip_tags=getattr(args, "skip_tags", ()),
        check=getattr(args, "check", False), diff=getattr(args, "diff", False), forks=getattr(args, "forks", 10),
        connect_slots=getattr(args, "connect_slots", DEFAULT_START_SLOTS),
        ssh_workers=getattr(args, "ssh_workers", None),
        verbosity=getattr(args, "verbose", 0), force_handlers=getattr(args, "force_handlers", False),
        run_lock=getattr(args, "lock", False), history=not getattr(args, "no_history", False),
        history_path=getattr(args, "history", None), argv=args.argv, host_slice=getattr(args, "host_slice", None),
        run_group=getattr(args, "run_group", None), history_required=getattr(args, "history_required", False),
        become=_become(args) if ask_become_pass else BecomeDefaults(), **play_flag_values(args))


def _cmd_schema(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner.modules.registry import module_names
    from opsrunner.validation import load_schema

    if args.name == "list":
        out.write("\n".join(["playbook", "inventory", *module_names()]) + "\n")
        return EXIT_OK
    name = args.name if args.name in ("playbook", "inventory") else f"modules/{args.name}"
    if args.name not in ("playbook", "inventory") and args.name not in module_names():
        raise UsageError(f"no schema named {args.name!r} (try: opsrunner schema list)")
    out.write(json.dumps(load_schema(name), indent=2) + "\n")
    return EXIT_OK


def _cmd_play(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from opsrunner import api

    if args.syntax_check:
        return _cmd_check(args, out)
    try:
        request = _request(args)
    except (OpsrunnerError, KeyboardInterrupt) as exc:  # -K without a terminal: a run that ended here
        _record_not_run(args, exc)
        raise
    if args.list_hosts or args.list_tasks or args.list_tags:
        return _list(request, args, out)
    from opsrunner.reporting import ConsoleReporter, JsonEventsReporter

    reporters: list[Reporter] = []
    events: QuietWhenClosed | None = None  # a file of its own: its loss is told as stdout's
    if args.json_events:
        try:
            if args.json_events != "-":
                events = QuietWhenClosed(open(args.json_events, "w", encoding="utf-8"), closes=True)  # noqa: SIM115
        except OSError as exc:
            error = UsageError(f"--json-events {args.json_events}: {exc.strerror}")
            api.record_not_run(request, error)
            raise error from None
        reporters.append(JsonEventsReporter(cast(IO[str], events) if events else out))
    if args.json_events != "-":
        reporters.append(ConsoleReporter(out, args.verbose, colour=False if args.no_color else None,
                                         diff=args.diff))
    run_id = None
    try:
        result = api.run(request, reporters, on_ready=_settle_the_heap)
        run_id = result.run_id
        return result.exit_code
    finally:
        for r in reporters:
            if not (isinstance(r, JsonEventsReporter) and events is None):
                r.close()
        if events is not None and events.lost:
            err.write(f"WARNING: the JSON events (--json-events {args.json_events}) could not be written "
                      f"{events.lost}; {_dropped(events)}, and the run went on to its end\n")
        if run_id:  # its record says so: the console may be the one that was lost
            _note_lost(request, run_id, [("output", out), ("error output", err),
                                         (f"JSON events (--json-events {args.json_events})", events)])


def _note_lost(request: PlayRequest, run_id: str, streams: list[tuple[str, Any]]) -> None:
    from opsrunner.history.location import resolve
    from opsrunner.history.store import HistoryStore
    from opsrunner.outstream import lost_notes

    notes = lost_notes(streams)
    if not notes:
        return
    with contextlib.suppress(Exception):  # recorded where possible (the history may be on that full disk)
        store = HistoryStore(resolve(request.history_path))
        for note in notes:
            store.add_note(run_id, note)
        store.close()


def _record_not_run(args: argparse.Namespace, exc: BaseException) -> None:
    """A `play` that ended before the library was asked to run it: its history row all the same."""
    from opsrunner import api

    if not (args.list_hosts or args.list_tasks or args.list_tags):  # a listing is no run
        api.record_not_run(_request(args, ask_become_pass=False), exc)


def _list(request: PlayRequest, args: argparse.Namespace, out: IO[str]) -> int:
    """--list-hosts, --list-tasks, --list-tags: what would run where, without connecting."""
    from opsrunner import api
    from opsrunner.listing import list_hosts, list_tags, list_tasks
    from opsrunner.targets import require_targets

    inputs = api.load(request)
    require_targets(inputs.playbook, inputs.inventory, inputs.options)
    text = list_hosts(inputs.playbook, inputs.inventory, inputs.options) if args.list_hosts else ""
    text += list_tasks(inputs.playbook, inputs.options) if args.list_tasks else ""
    text += list_tags(inputs.playbook, inputs.options) if args.list_tags else ""
    out.write(text)
    return EXIT_OK


#: Set by run(): this process runs one command and exits (main() may also be called in a
#: process that lives on, as the tests do, where freezing the heap would keep its garbage).
_ONE_COMMAND_PROCESS = False


def _settle_the_heap() -> None:
    """Before the play, in a process that exits after it: what is loaded by now (modules, the
    parsed playbook and inventory: ~25,000 objects) lives until exit, so the cyclic GC need
    not walk it again at every full collection (40-160 ms each at 50 hosts, measured); and
    young objects are collected less often (a host and task allocates ~600). GC time of a
    50-host run: 60-200 ms -> ~30 ms."""
    if _ONE_COMMAND_PROCESS:
        gc.freeze()
        gc.set_threshold(5000, 20, 20)


def _cmd_logs(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner import api
    from opsrunner.logs import run_logs

    return run_logs(args, out, api.load(_request(args)))


def _cmd_check(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner import api
    from opsrunner.playbook import iter_tasks

    inputs, report = api.check(_request(args))
    playbook = inputs.playbook
    tasks = sum(len(iter_tasks(p.tasks)) + len(p.handlers) for p in playbook.plays)
    out.write(f"{playbook.path}: OK ({len(playbook.plays)} plays, {tasks} tasks, "
              f"{len(inputs.inventory.hosts)} inventory hosts; preflight passed on {len(report.hosts)})\n")
    return EXIT_OK


def main(argv: list[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    # A reader that goes away (`| head`) stops the output, never the command; output that
    # cannot be written (a full disk) never stops a run, and is told (outstream.py).
    stdout, stderr = QuietWhenClosed(out or sys.stdout), QuietWhenClosed(err or sys.stderr)
    goes_on: list[bool] = []  # _command says whether it is a run (_goes_on)
    # The process's own streams too, where they are the command's: what writes to them directly
    # (a warning of the history, of ansible-style patterns) is guarded and told the same way.
    own = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = (cast(IO[str], stdout) if out is None else own[0],
                              cast(IO[str], stderr) if err is None else own[1])
    try:
        code = _command(argv, cast(IO[str], stdout), cast(IO[str], stderr), goes_on)
    finally:
        sys.stdout, sys.stderr = own
    return _told_lost(stdout, stderr, code, any(goes_on))


def _told_lost(out: QuietWhenClosed, err: QuietWhenClosed, code: int, goes_on: bool) -> int:
    """Output that could not be written, told on stderr at the end. A run (`play`, `schedule
    run`) went on to its end: its exit code stands. Any other command's output is cut: it exits
    1, as coreutils do on a full disk (`opsrunner history --json > f && use f` must not use a cut f)."""
    cut = [(name, s) for name, s in (("output", out), ("error output", err)) if s.lost]
    for name, stream in cut:
        if goes_on:
            err.write(f"WARNING: the {name} could not be written {stream.lost}; {_dropped(stream)}, "
                      "and the command went on to its end\n")
        else:
            err.write(f"ERROR: the {name} could not be written {stream.lost}; {_dropped(stream)}: "
                      "it is cut\n")
    return EXIT_OUTPUT_CUT if cut and not goes_on and code == EXIT_OK else code


def _dropped(stream: QuietWhenClosed) -> str:
    return "the rest of it was dropped" if stream.lost_to_the_end else "what could not be written was dropped"


def _hung_up(*streams: IO[str]) -> None:
    for stream in streams:
        if isinstance(stream, QuietWhenClosed):
            stream.hang_up()


def _not_done(args: argparse.Namespace | None, words: list[str]) -> str:
    """What a command stopped by bad input did not do, as its last line says it: `schedule add`
    added and installed nothing (its playbook's check says the same), any other command ran
    nothing. `words`: the command line, where its options did not parse."""
    if args is not None:
        adding = args.command == "schedule" and getattr(args, "schedule_command", None) == "add"
    else:
        adding = words[:1] == ["schedule"] and next((w for w in words[1:] if not w.startswith("-")), "") == "add"
    if not adding:
        return "nothing was run."
    from opsrunner.schedule.commands import not_added

    return not_added(getattr(args, "name", None))


def _goes_on(args: argparse.Namespace) -> bool:
    """A run, which goes on to its end whatever becomes of its output (a listing is none)."""
    if args.command == "play":
        return not any(bool(getattr(args, k)) for k in ("list_hosts", "list_tasks", "list_tags", "syntax_check"))
    return bool(args.command == "schedule" and args.schedule_command == "run")


def _command(argv: list[str] | None, out: IO[str], err: IO[str], goes_on: list[bool]) -> int:
    """The command's exit code; `goes_on` gets whether it is a run (_goes_on)."""
    words = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
        _prestart_ssh_workers(words)
        args = build_parser().parse_args(argv)
        args.argv = words
        if args.command is None:
            raise ArgumentsError("opsrunner: a command is required (play, check, inventory, logs, schema, history, "
                                 "show, schedule, serve); see --help")
        from opsrunner.history.views import cmd_history, cmd_show
        from opsrunner.inventory.command import cmd_inventory
        from opsrunner.schedule.commands import cmd_schedule
        from opsrunner.web.commands import cmd_serve

        goes_on.append(_goes_on(args))
        if args.command in ("play", "schedule"):
            # SIGHUP: the terminal went away; a run goes on without its output there (interrupts.py)
            with hangup_drops_output(lambda: _hung_up(out, err)) if goes_on[0] else contextlib.nullcontext():
                return _cmd_play(args, out, err) if args.command == "play" else cmd_schedule(args, out, err)
        handler = {"check": _cmd_check, "schema": _cmd_schema, "history": cmd_history,
                   "show": cmd_show, "logs": _cmd_logs, "serve": cmd_serve,
                   "inventory": cmd_inventory}[args.command]
        return handler(args, out)
    except ValidationError as exc:
        for problem in exc.problems:
            err.write(f"ERROR: {problem}\n")
        err.write(f"{len(exc.problems)} error(s); {_not_done(args, words)}\n")
        return EXIT_VALIDATION
    except UsageError as exc:
        err.write(f"ERROR: {exc}\n")
        return exc.exit_code
    except OpsrunnerError as exc:
        err.write(f"ERROR: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        err.write("interrupted\n")
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except SystemExit as exc:  # argparse --help / --version
        return int(exc.code or 0)
    except Exception as exc:  # last resort: Ansible's 250, with the traceback for a bug report
        import traceback

        traceback.print_exc(file=err)
        err.write(f"ERROR: unexpected {type(exc).__name__}: {exc}\n")
        return EXIT_UNEXPECTED


def _prestart_ssh_workers(words: list[str]) -> None:
    """Where this `play` is likely to hold its ssh connections in worker processes, start
    their seed now, before this process imports and loads the rest (workerseed.py): its own
    imports then overlap ours. Only in a process that runs one command and exits (run()),
    which ends the seed if the run wants no workers."""
    if not _ONE_COMMAND_PROCESS or words[:1] != ["play"]:
        return
    import os

    from opsrunner.connections import workerseed
    from opsrunner.sshworkers import AUTO_MIN_CORES, usable_cores

    if workerseed.likely_wanted(words, os.environ, usable_cores(), AUTO_MIN_CORES):
        workerseed.prestart()


def run() -> NoReturn:
    """The `opsrunner` command: main(), then exit without the interpreter's teardown.

    When main() returns, the run's files are closed and its host threads have ended; what
    the teardown would add is freeing ~300 modules' objects one by one, ~60 ms of every run
    (measured). An interrupted run, whose host threads may still be stopping remote work,
    takes the normal exit, which waits for them; so does a run under a profiler or a tracer
    (cProfile, coverage), which writes its data after the program ends."""
    import atexit
    import os
    import threading

    global _ONE_COMMAND_PROCESS
    _ONE_COMMAND_PROCESS = True
    code = main()
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        QuietWhenClosed(stream).flush()  # a reader gone at the very end: dropped, as before
    os._exit(code)
