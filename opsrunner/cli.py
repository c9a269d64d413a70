"""Command line: argument parsing and exit codes. Everything else lives in the library."""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import sys
from pathlib import Path
from typing import IO, Any, NoReturn, cast

from opsrunner import __version__
from opsrunner.errors import OpsrunnerError, Problem, SourcePos, Terminated, UsageError, ValidationError
from opsrunner.outstream import QuietWhenClosed

EXIT_OK, EXIT_VALIDATION, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_UNEXPECTED = 0, 4, 5, 99, 250
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as shells and service managers expect


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="opsrunner", description="Declarative restarts of long-running jobs "
                     "on remote hosts, over ssh and container exec hops.")
    parser.add_argument("--version", action="version", version=f"opsrunner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    play = sub.add_parser("play", help="run a playbook")
    _common(play)
    play.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                      help="key=value pairs, a YAML/JSON mapping, or @file.yml (highest precedence)")
    play.add_argument("-l", "--limit", help="further limit hosts with a pattern (a:b, a:&b, a:!b, globs)")
    play.add_argument("-t", "--tags", action="append", default=[], help="only tasks with these tags")
    play.add_argument("--skip-tags", action="append", default=[], help="skip tasks with these tags")
    play.add_argument("-C", "--check", action="store_true", help="dry run: change nothing")
    play.add_argument("-D", "--diff", action="store_true", help="show content changes")
    play.add_argument("--force-handlers", action="store_true", help="run notified handlers even on failed hosts")
    play.add_argument("-f", "--forks", type=int, default=10, help="hosts in parallel (default 10)")
    play.add_argument("-v", "--verbose", action="count", default=0,
                      help="more output; -vvv prints every command exactly as sent")
    play.add_argument("--json-events", metavar="FILE", help="write JSON Lines events to FILE ('-' = stdout)")
    play.add_argument("--list-tasks", action="store_true", help="list tasks and exit (no connection)")
    play.add_argument("--list-hosts", action="store_true", help="list hosts per play and exit (no connection)")
    play.add_argument("--no-color", action="store_true", help="no ANSI colours")
    play.add_argument("--lock", action="store_true",
                      help="refuse to start while another run of this playbook+inventory is running here")
    play.add_argument("--no-history", action="store_true", help="do not record this run in the run history")
    play.add_argument("--history", metavar="PATH", help="run history database (default $OPSRUNNER_HISTORY "
                      "or ~/.local/state/opsrunner/history.db)")

    check = sub.add_parser("check", help="validate a playbook and inventory; touch no host")
    _common(check)
    check.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS")

    from opsrunner.logs import add_parser as add_logs_parser

    add_logs_parser(sub)

    schema = sub.add_parser("schema", help="print a JSON Schema (for editors / yaml-language-server)")
    schema.add_argument("name", nargs="?", default="playbook",
                        help="playbook, inventory, a module name, or 'list'")
    from opsrunner.history.views import register as register_history
    from opsrunner.schedule.commands import register as register_schedule

    register_history(sub)
    register_schedule(sub)
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("playbook", help="playbook file; a bare name is looked up here, then in playbooks/")
    p.add_argument("-i", "--inventory", action="append", default=[], metavar="INVENTORY",
                   help="inventory file or directory (default inventory/hosts.yml)")


def parse_extra_vars(values: list[str]) -> dict[str, Any]:
    from opsrunner.yamlsource import load_yaml_file, load_yaml_text

    result: dict[str, Any] = {}
    problems: list[Problem] = []
    for number, value in enumerate(values, 1):
        if value.startswith("@"):
            try:
                data = load_yaml_file(Path(value[1:]))
            except ValidationError as exc:
                problems += exc.problems
                continue
            origin = value[1:]
        elif value.lstrip()[:1] in ("{", "["):
            try:
                data = load_yaml_text(value, "<-e>")
            except ValidationError as exc:
                problems += exc.problems
                continue
            origin = "<-e>"
        elif value[:1] in ("/", "."):
            problems.append(Problem(SourcePos("<-e>"), f"to read variables from {value}, write -e @{value}"))
            continue
        else:
            data = {}
            try:
                words = shlex.split(value)  # as ansible-playbook -e: k="a b" n=1 is two variables
            except ValueError as exc:
                # The value itself is not shown: it may hold a secret.
                problems.append(Problem(SourcePos("<-e>"), f"-e value {number} cannot be split "
                                        f"like a shell: {exc}"))
                continue
            for pair in words:
                key, sep, val = pair.partition("=")
                if not sep or not key.isidentifier():
                    problems.append(Problem(SourcePos("<-e>"), f"expected key=value, got {pair!r}", pair))
                    continue
                data[key] = val
            origin = "<-e>"
        if data is not None and not isinstance(data, dict):
            problems.append(Problem(SourcePos(origin), "extra vars must be a mapping"))
            continue
        result.update(data or {})
    if problems:
        raise ValidationError(problems)
    return result


def _load(args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    from opsrunner.inventory import load_inventory, localhost_inventory
    from opsrunner.playbook import load_playbook
    from opsrunner.project import default_inventory, resolve_playbook

    problems: list[Problem] = []
    inventory = playbook = None
    extra: dict[str, Any] = {}
    sources: list[Path | str] = [*args.inventory] or [default_inventory(Path.cwd())]
    playbook_path = resolve_playbook(args.playbook, Path.cwd())
    try:
        playbook = load_playbook(playbook_path)
    except ValidationError as exc:
        problems += exc.problems
    try:
        inventory = load_inventory(sources, playbook_path.parent) if args.inventory or Path(sources[0]).exists() \
            else localhost_inventory(playbook_path.parent)
    except ValidationError as exc:
        problems += exc.problems
    try:
        extra = parse_extra_vars(args.extra_vars)
    except ValidationError as exc:
        problems += exc.problems
    if problems:
        raise ValidationError(problems)
    return playbook, inventory, extra


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


def _cmd_play(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner.engine import Engine, RunOptions
    from opsrunner.interrupts import sigterm_as_interrupt
    from opsrunner.listing import list_hosts, list_tasks
    from opsrunner.reporting import ConsoleReporter, JsonEventsReporter
    from opsrunner.secrets import mask_problems

    playbook, inventory, extra = _load(args)
    if args.forks < 1:
        raise UsageError("--forks must be at least 1")
    options = RunOptions(check=args.check, diff=args.diff, limit=args.limit, tags=_split_tags(args.tags),
                         skip_tags=_split_tags(args.skip_tags), forks=args.forks, extra_vars=extra,
                         verbosity=args.verbose, force_handlers=args.force_handlers)
    from opsrunner.targets import require_targets

    require_targets(playbook, inventory, options)  # bad or empty patterns fail before any host is contacted
    if args.list_hosts or args.list_tasks:
        text = list_hosts(playbook, inventory, options) if args.list_hosts else ""
        text += list_tasks(playbook, options) if args.list_tasks else ""
        out.write(text)
        return EXIT_OK
    from opsrunner.history.recorder import recorder_for_play
    from opsrunner.locks.run_lock import acquire_run_lock as lock_run

    reporters: list[Any] = []
    lock = lock_run(playbook.path, args.inventory) if args.lock else None
    if not args.no_history:
        reporters.append(recorder_for_play(playbook.path, args.inventory, extra, args.argv, args.history))
    events_stream = None
    if args.json_events:
        try:
            events_stream = out if args.json_events == "-" else open(args.json_events, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise UsageError(f"--json-events {args.json_events}: {exc.strerror}") from None
        reporters.append(JsonEventsReporter(events_stream))
    if args.json_events != "-":
        reporters.append(ConsoleReporter(out, args.verbose, colour=False if args.no_color else None,
                                         diff=args.diff))
    _settle_the_heap()
    try:
        with sigterm_as_interrupt():
            summary = Engine(playbook, inventory, options, reporters).run()
    except BaseException as exc:  # every way out closes the run's history row, with its exit code
        _end_history(reporters, _exit_code_of(exc))
        if isinstance(exc, ValidationError):  # preflight: problems may quote a variable's value
            raise mask_problems(exc, inventory, extra) from None
        raise
    finally:
        for r in reporters:
            if not (isinstance(r, JsonEventsReporter) and events_stream is out):
                r.close()
        if lock is not None:
            lock.release()
    return summary.exit_code()


def _exit_code_of(exc: BaseException) -> int:
    """The exit code main() gives for an exception that ends a play."""
    if isinstance(exc, ValidationError):
        return EXIT_VALIDATION
    if isinstance(exc, OpsrunnerError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    return EXIT_UNEXPECTED


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


def _end_history(reporters: list[Any], code: int) -> None:
    """A run that ends without a recap is still recorded as ended, with its exit code."""
    from opsrunner.history.recorder import HistoryRecorder

    for reporter in reporters:
        if isinstance(reporter, HistoryRecorder):
            reporter.finish(code)


def _cmd_logs(args: argparse.Namespace, out: IO[str]) -> int:
    from opsrunner.logs import run_logs

    return run_logs(args, out, _load)


def _split_tags(values: list[str]) -> frozenset[str]:
    return frozenset(t.strip() for v in values for t in v.split(",") if t.strip())


def _cmd_check(args: argparse.Namespace, out: IO[str]) -> int:
    playbook, inventory, extra = _load(args)
    from opsrunner.playbook import iter_tasks
    from opsrunner.preflight import check_playbook

    report = check_playbook(playbook, inventory, extra)
    if report.problems:
        raise ValidationError(report.listing())
    tasks = sum(len(iter_tasks(p.tasks)) + len(p.handlers) for p in playbook.plays)
    out.write(f"{playbook.path}: OK ({len(playbook.plays)} plays, {tasks} tasks, "
              f"{len(inventory.hosts)} inventory hosts; preflight passed on {len(report.hosts)})\n")
    return EXIT_OK


def main(argv: list[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    # A reader that goes away (`| head`) stops the output, never the command (outstream.py).
    out = cast(IO[str], QuietWhenClosed(out or sys.stdout))
    err = cast(IO[str], QuietWhenClosed(err or sys.stderr))
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)
        if args.command is None:
            raise UsageError("opsrunner: a command is required (play, check, logs, schema, history, show, schedule); "
                             "see --help")
        from opsrunner.history.views import cmd_history, cmd_show
        from opsrunner.schedule.commands import cmd_schedule

        handler = {"play": _cmd_play, "check": _cmd_check, "schema": _cmd_schema, "history": cmd_history,
                   "show": cmd_show, "schedule": cmd_schedule, "logs": _cmd_logs}[args.command]
        return handler(args, out)
    except ValidationError as exc:
        for problem in exc.problems:
            err.write(f"ERROR: {problem}\n")
        err.write(f"{len(exc.problems)} error(s); nothing was run.\n")
        return EXIT_VALIDATION
    except UsageError as exc:
        err.write(f"ERROR: {exc}\n")
        return EXIT_USAGE
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
