"""`opsrunner schedule add|list|remove|run`: argument parsing and output."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opsrunner.cliopts import add_extra_vars, add_inventory, add_limit, add_tags
from opsrunner.errors import ArgumentsError, OpsrunnerError, Problem, SourcePos, UsageError, ValidationError
from opsrunner.history.location import without_password
from opsrunner.schedule.lastruns import LastRun, LastRuns, history_of
from opsrunner.schedule.spec import SEARCH_DAYS, SpecError, every_to_calendar, parse_calendar, to_cron

if TYPE_CHECKING:
    from opsrunner.schedule.cron import CronSpec
    from opsrunner.schedule.store import Schedule


def register(sub: argparse._SubParsersAction[Any]) -> None:
    sched = sub.add_parser("schedule", help="scheduled runs: systemd timers (or cron) running a playbook")
    ssub = sched.add_subparsers(dest="schedule_command", metavar="add|list|remove|run")
    add = ssub.add_parser("add", help="validate a playbook, write the schedule file and install its timer")
    add.add_argument("name", help="schedule name (letters, digits, - and _)")
    add.add_argument("playbook", help="playbook file, relative to the current directory (the project)")
    add_inventory(add)
    add_extra_vars(add)
    add_limit(add)
    add_tags(add)
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="SPEC", help="systemd OnCalendar expression: daily, 'Sun 03:00', "
                      "'*-*-* 04:00:00', 'Mon..Fri 08:30'; or a 5-field cron expression: '*/15 9-17 * * 1-5'")
    when.add_argument("--every", metavar="INTERVAL", help="15m, 6h, 1d: minutes that divide an hour (1m..60m) or "
                      "whole hours that divide a day (1h..24h)")
    add.add_argument("--git-pull", action="store_true",
                     help="fast-forward the project first; refuse to run on a dirty or diverged tree")
    add.add_argument("--notify", action="append", default=[], metavar="URL",
                     help="an apprise URL to alert (slack://, mailto://, ntfy://, json://, ...; a plain "
                     "http(s) URL gets a JSON POST)")
    add.add_argument("--notify-on", choices=("failure", "recovery", "always"), default="failure",
                     help="failure (default); recovery: failures and the first success after one; always")
    add.add_argument("--dashboard", metavar="URL", help="the dashboard's address (opsrunner serve): alerts "
                     "link to the run's page there")
    add.add_argument("--randomized-delay", type=int, default=60, metavar="SECONDS",
                     help="timer's RandomizedDelaySec (default 60)")
    add.add_argument("--cron", action="store_true", help="a crontab entry instead of systemd units")
    add.add_argument("--unit-dir", metavar="DIR", help="write units here and activate nothing "
                     "(also $OPSRUNNER_UNIT_DIR)")
    add.add_argument("--dry-run", action="store_true",
                     help="check everything and print the schedule file and the units (or crontab line); write nothing")
    add.add_argument("--history", metavar="PATH_OR_URL",
                     help="run history its runs are recorded in: a SQLite file or postgresql://user@host:port/db "
                     "(default $OPSRUNNER_HISTORY or ~/.local/state/opsrunner/history.db); kept in the schedule file, "
                     "without a password")
    lst = ssub.add_parser("list", help="schedules with their next and last run")
    lst.add_argument("--history", metavar="PATH_OR_URL",
                     help="run history to read last runs from where a schedule file names none (a SQLite file or "
                     "a postgresql:// URL; default $OPSRUNNER_HISTORY or ~/.local/state/opsrunner/history.db)")
    rm = ssub.add_parser("remove", help="uninstall the timer (or cron entry) and delete the schedule file")
    rm.add_argument("name", help="the schedule to remove")
    rm.add_argument("--unit-dir", metavar="DIR", help="where its units were written, if not where the schedule "
                    "file says (add --unit-dir)")
    run = ssub.add_parser("run", help="run a schedule now, exactly as its timer does")
    run.add_argument("name", help="the schedule to run")
    for p in (add, lst, rm, run):
        p.add_argument("--schedules", metavar="DIR", help="schedule files folder (default $OPSRUNNER_SCHEDULES "
                       "or ~/.config/opsrunner/schedules)")


def cmd_schedule(args: argparse.Namespace, out: IO[str], err: IO[str] | None = None) -> int:
    if args.schedule_command is None:
        raise ArgumentsError("opsrunner schedule: a subcommand is required (add, list, remove, run)")
    from opsrunner.schedule import store

    folder = store.schedules_dir(args.schedules)
    if args.schedule_command == "add":
        return _add(args, folder, out)
    if args.schedule_command == "list":
        return _list(args, folder, out)
    if args.schedule_command == "remove":
        return _remove(args, folder, out)
    from opsrunner.schedule.runner import run_schedule

    try:
        schedule = store.load(folder, args.name)
    except (ValidationError, OSError, UnicodeError) as exc:  # edited by hand: its run fails, recorded, alerted
        from opsrunner.schedule.runner import run_broken

        return run_broken(store.path_of(folder, args.name), store.problem_text(exc), out, err or sys.stderr)
    history = history_of(schedule)
    if history:  # its runs are recorded where `add` said, whatever the timer's environment
        os.environ["OPSRUNNER_HISTORY"] = history
    return run_schedule(schedule, out, err or sys.stderr)


def _spec(args: argparse.Namespace) -> tuple[str, str | None]:
    """(the OnCalendar expression, the cron expression) of --at or --every; "" where a cron
    expression installed by cron needs none."""
    from opsrunner.schedule.cron import cron_to_calendar, is_cron, parse_cron, systemd_verdict

    if args.randomized_delay < 0:
        raise ValidationError([Problem(SourcePos("<--randomized-delay>"), "must be 0 or more seconds",
                                       "--randomized-delay")])
    option = "--at" if args.at else "--every"
    try:
        cron = parse_cron(args.at) if args.at and is_cron(args.at) else None
        if cron is not None:
            calendar = "" if args.cron else cron_to_calendar(cron)
        else:
            calendar = args.at if args.at else every_to_calendar(args.every)
            parsed = parse_calendar(calendar)
            if args.cron:
                to_cron(parsed)
        refused = systemd_verdict(calendar) if calendar else None
        if refused:
            raise SpecError(f"systemd-analyze calendar refuses {calendar!r}: {refused}")
        _check_fires(cron, calendar)
    except SpecError as exc:
        raise ValidationError([Problem(SourcePos(f"<{option}>"), str(exc), option)]) from None
    return calendar, cron.text if cron else None


def _check_fires(cron: CronSpec | None, calendar: str) -> None:
    """A schedule that never runs is a mistake (`0 3 31 2 *`: there is no 31 February)."""
    now = dt.datetime.now().replace(microsecond=0)
    if cron is not None and cron.next_run(now) is None:
        raise SpecError(f"cron expression {cron.text!r} never fires: no date matches it")
    if cron is None and parse_calendar(calendar).next_run(now) is None:
        raise SpecError(f"{calendar!r} never fires: no date in the next {SEARCH_DAYS // 366} years matches it")


def _add(args: argparse.Namespace, folder: Path, out: IO[str]) -> int:
    from opsrunner.schedule import store

    name = store.check_name(args.name)
    calendar, cron = _spec(args)
    target = store.path_of(folder, name)
    if target.exists():
        raise UsageError(f"schedule {name!r} already exists ({target}); remove it first")
    from opsrunner.schedule.units import UnitTarget, check_installable

    check_installable(args.cron, None if args.cron else UnitTarget.choose(args.unit_dir))
    history = _history(args.history)
    project = Path.cwd()
    _check_notify(args.notify)
    if args.git_pull:
        _check_git_pull(project)
    code = _check(args, name)
    if code != 0:
        return code
    schedule = store.Schedule(
        name=name, project=str(project), playbook=args.playbook, on_calendar=calendar, every=args.every,
        inventory=args.inventory, extra_vars=args.extra_vars, limit=args.limit, tags=args.tags,
        skip_tags=args.skip_tags, git_pull=args.git_pull,
        notify=args.notify, notify_on=args.notify_on, randomized_delay=args.randomized_delay,
        installer="cron" if args.cron else "systemd", dashboard=args.dashboard, cron=cron,
        unit_dir=str(Path(args.unit_dir).expanduser().resolve()) if args.unit_dir and not args.cron else None,
        crontab_file=_crontab_file() if args.cron else None, history=without_password(history))
    if history != schedule.history:
        sys.stderr.write(f"WARNING: {NO_PASSWORD}\n")
    if args.dry_run:
        out.write(_dry_run(schedule, folder, args))
        return 0
    path = store.save(folder, schedule)
    try:
        written = _install(schedule, folder, args)
    except Exception:
        path.unlink()
        raise
    out.write(f"schedule {name}: {args.playbook} at {args.at or calendar!r}, {_when(schedule, args)}\n")
    out.write(f"  wrote {path}\n" + "".join(f"  wrote {w}\n" for w in written))
    out.write(f"  its runs are recorded in {schedule.history}\n")
    return 0


def _when(schedule: Schedule, args: argparse.Namespace) -> str:
    """When the schedule added runs next; where nothing runs it (units in a custom unit
    directory, a line in a crontab file), that it is written only, and what would run it."""
    from opsrunner.schedule.units import UnitTarget, crontab_file

    if args.cron and crontab_file() is not None:
        return ("written, not activated (crontab file): nothing runs it until its line is installed in a crontab, "
                f"then next run {next_run(schedule)}")
    if not args.cron and not UnitTarget.choose(args.unit_dir).activate:
        return ("written, not activated (custom unit directory): nothing runs it until its timer is enabled, "
                f"then next run {next_run(schedule)}")
    return f"next run {next_run(schedule)}"


NO_PASSWORD = ("the run history's password is not kept in the schedule file: its runs read it where libpq does "
               "(~/.pgpass, $PGPASSWORD), or from $OPSRUNNER_HISTORY where that names the same database")


def _history(option: str | None) -> str:
    """The run history the schedule's runs are recorded in, as `opsrunner play` picks it:
    --history, else $OPSRUNNER_HISTORY, else the user's file; resolved now (a path made
    absolute), as the timer runs elsewhere with another environment."""
    import re

    from opsrunner.history.location import is_postgres, resolve

    given, source = (option, "--history") if option else (os.environ.get("OPSRUNNER_HISTORY"), "$OPSRUNNER_HISTORY")
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", given or "")
    if given and scheme and not is_postgres(given):
        raise ValidationError([Problem(SourcePos(f"<{source}>"), f"a {scheme.group(1)}:// URL is no run history: "
                                       "give a SQLite file or a postgresql:// URL", source)])
    location = resolve(given)  # a path made absolute here, a URL as given; neither: the user's file
    if not is_postgres(location):  # checked now, not at the first run, whose record would be lost
        from opsrunner.history.sqlite_backend import unusable

        why = unusable(Path(location))
        if why is not None:
            where = source if given else "history"
            raise ValidationError([Problem(SourcePos(f"<{where}>"), f"{location} is no opsrunner run history: "
                                           f"{why}", where)])
    return location


def _check_notify(urls: list[str]) -> None:
    """Every --notify URL must be one apprise can deliver to: checked now, not at the first failure."""
    from opsrunner.schedule.notify import check_url, rejected_label

    # Named masked: a URL's path and query often are its credential (apprise repeats it in why)
    problems = [Problem(SourcePos("<--notify>"), f"{rejected_label(url)!r}: {why.replace(url, rejected_label(url))}",
                        "--notify") for url in urls if (why := check_url(url)) is not None]
    if problems:
        raise ValidationError(problems)


def _check_git_pull(project: Path) -> None:
    """--git-pull needs a git checkout whose branch has an upstream to pull from: checked now,
    not at the first run at 3 in the morning."""
    import subprocess

    def problem(why: str) -> ValidationError:
        return ValidationError([Problem(SourcePos("<--git-pull>"), why, "--git-pull")])

    try:
        upstream = subprocess.run(["git", "-C", str(project), "rev-parse", "--abbrev-ref", "--symbolic-full-name",
                                   "@{upstream}"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise problem(f"cannot run git: {exc}") from None
    if upstream.returncode != 0:
        detail = (upstream.stderr.strip().splitlines() or ["no output"])[-1]
        raise problem(f"{project} is not a git checkout with an upstream branch to pull from ({detail})")


def _dry_run(schedule: Schedule, folder: Path, args: argparse.Namespace) -> str:
    """What `schedule add` would write, and where; nothing is written or activated."""
    import yaml

    from opsrunner.schedule import store, units

    data = {k: v for k, v in schedule.__dict__.items() if v not in (None, [], "")}
    text = [f"# dry run: nothing written. Schedule file {store.path_of(folder, schedule.name)}:",
            store.HEADER.format(name=schedule.name) + yaml.safe_dump(data, sort_keys=False)]
    if args.cron:
        text += ["# crontab line:", units.cron_line(schedule, folder) + "\n"]
    else:
        target = units.UnitTarget.choose(args.unit_dir)
        base = target.folder / units.unit_name(schedule.name)
        text += [f"# {base}.service:", units.render_service(schedule, folder, system=not target.user),
                 f"# {base}.timer:", units.render_timer(schedule)]
        if target.activate:
            systemctl = "systemctl --user" if target.user else "systemctl"
            text.append(f"# then: {systemctl} daemon-reload && {systemctl} enable --now {base.name}.timer\n")
    text.append(f"# next run {next_run(schedule)}\n")
    return "\n".join(text)


def not_added(name: str | None) -> str:
    """How `schedule add` stopped by bad input (its arguments, its playbook's check) ends: what
    it did not do."""
    return f"schedule {name!r} not added: nothing was installed." if name else "nothing was installed."


def _check(args: argparse.Namespace, name: str) -> int:
    """`opsrunner check` of what the schedule will run, in this process; its exit code."""
    from opsrunner import api
    from opsrunner.exitcodes import exit_code_of

    try:
        api.check(api.PlayRequest(args.playbook, inventory=args.inventory, extra_vars=args.extra_vars,
                                  limit=args.limit, tags=args.tags, skip_tags=args.skip_tags))
    except ValidationError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"ERROR: {problem}\n")
        sys.stderr.write(f"{len(exc.problems)} error(s); {not_added(name)}\n")
        return exit_code_of(exc)
    except OpsrunnerError as exc:
        sys.stderr.write(f"ERROR: {exc}\n{not_added(name)}\n")
        return exit_code_of(exc)
    return 0


def _install(schedule: Schedule, folder: Path, args: argparse.Namespace) -> list[str]:
    from opsrunner.schedule import units

    if args.cron:
        written = units.install_cron(schedule, folder)
        return [written + " (not activated: crontab file)" if units.crontab_file() is not None else written]
    target = units.UnitTarget.choose(args.unit_dir)
    files = [str(p) for p in units.install_systemd(schedule, folder, target)]
    if not target.activate:
        files[-1] += " (not activated: custom unit directory)"
    return files


def next_run(schedule: Schedule) -> str:
    when = schedule.next_run()
    return when.strftime("%Y-%m-%d %H:%M:%S") if when else "never"


def _list(args: argparse.Namespace, folder: Path, out: IO[str]) -> int:
    from opsrunner.history.location import resolve
    from opsrunner.schedule import store
    from opsrunner.schedule.units import timer_active

    histories = LastRuns(resolve(args.history), args.history)
    rows = [("NAME", "SPEC", "NEXT RUN", "LAST RUN", "RESULT", "PLAYBOOK")]
    broken = []
    try:
        for listed in store.scan(folder):
            s = listed.schedule
            upcoming = next_run(s) if timer_active(s) else ""  # an inactive timer runs nothing
            spec = s.spec if listed.error is None else "INVALID"
            shown = " ".join([s.playbook, *s.tag_args()])  # with its tag selection, if any
            rows.append((s.name, spec, upcoming, *_last_columns(histories.last(s)), shown))
            if listed.error is not None:
                broken.append(f"WARNING: schedule {s.name}: {listed.error}; its runs fail as bad input (exit 4) "
                              "until the file is fixed\n")
    finally:
        histories.close()
    sys.stderr.write("".join(broken))
    for shown, cause in histories.unreadable.items():
        sys.stderr.write(f"WARNING: cannot read the run history {shown}: {cause}; LAST RUN and RESULT are unknown\n")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    return 0


def _last_columns(last: LastRun) -> tuple[str, str]:
    """LAST RUN and RESULT of `schedule list`: `-` where none is recorded, `unknown` where its
    history cannot be read."""
    if last.error is not None:
        return "unknown", "unknown"
    if last.run is None:
        return "-", "-"
    started = dt.datetime.fromtimestamp(last.run.started).strftime("%Y-%m-%d %H:%M:%S")
    return started, f"{last.run.result} ({last.run.id})"


def _crontab_file() -> str:
    """Where a cron schedule's line goes, as the schedule records it (remove finds it there):
    $OPSRUNNER_CRONTAB's file, whole, else the user's crontab (units.USER_CRONTAB)."""
    from opsrunner.schedule.units import USER_CRONTAB, crontab_file

    path = crontab_file()
    return str(path.expanduser().resolve()) if path is not None else USER_CRONTAB


def _remove_cron(schedule: Schedule, out: IO[str], sure: bool) -> None:
    """Its crontab line out; where the schedule may not be a cron one (`sure` False), a crontab
    that cannot be read (no `crontab` here) means there is none to take out."""
    from opsrunner.schedule import units

    try:
        removed, where = units.remove_cron(schedule.name, schedule.crontab_file)
    except (units.InstallError, OSError, subprocess.SubprocessError):
        if sure:
            raise
        return
    if removed:
        out.write(f"  removed the crontab entry of {schedule.name}\n")
    elif sure:
        out.write(f"  no crontab entry of {schedule.name} was found ({where})\n")


def _remove(args: argparse.Namespace, folder: Path, out: IO[str]) -> int:
    from opsrunner.schedule import store, units

    try:
        schedule = store.load(folder, args.name)
        installers = [schedule.installer]
    except (ValidationError, OSError, UnicodeError) as exc:  # edited by hand: removed as far as it reads
        path = store.path_of(folder, args.name)
        kept = store.salvaged_keys(path)
        schedule = store.salvage(path, kept)
        # Where its `installer` cannot be read, both ways are undone: a cron line left behind
        # would run a schedule that no longer exists.
        installers = [schedule.installer] if "installer" in kept else ["systemd", "cron"]
        out.write(f"  the schedule file does not load ({store.problem_text(exc)}); removing what it installed "
                  f"({' or '.join(installers)})\n")
    for installer in installers:
        if installer == "cron":
            _remove_cron(schedule, out, sure=len(installers) == 1)
        else:
            for f in units.remove_systemd(schedule.name, units.UnitTarget.choose(args.unit_dir or schedule.unit_dir)):
                out.write(f"  removed {f}\n")
    path = store.path_of(folder, schedule.name)
    path.unlink()
    out.write(f"  removed {path}\nschedule {schedule.name} removed\n")
    return 0
