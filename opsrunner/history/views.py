"""`opsrunner history`, `opsrunner show RUN_ID`, `opsrunner history prune`: parsing and output."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from opsrunner.cliopts import optional_commands
from opsrunner.errors import CommandError, UsageError

if TYPE_CHECKING:  # sqlite3 is imported only when a history command runs
    from opsrunner.history.store import HistoryStore, RunRow


def register(sub: argparse._SubParsersAction[Any]) -> None:
    hist = sub.add_parser("history", help="past runs, newest first (from the run history database)")
    hist.add_argument("--playbook", help="only runs of this playbook (path or file name)")
    hist.add_argument("--host", help="only runs that touched this host")
    hist.add_argument("--schedule", help="only runs of this schedule")
    hist.add_argument("--failed", action="store_true",
                      help="only runs that did not succeed: an exit code other than 0, or aborted (controller gone); "
                           "the dashboard's result=failed")
    hist.add_argument("--group", help="only the runs of this run group (the slices of one run)")
    hist.add_argument("-n", type=int, default=20, dest="limit", help="at most N runs (default 20)")
    hist.add_argument("--json", action="store_true", help="JSON instead of a table")
    _db_option(hist)
    hsub = optional_commands(hist, dest="history_command", metavar="prune")
    prune = hsub.add_parser("prune", help="delete runs older than --keep-days")
    prune.add_argument("--keep-days", type=float, required=True, metavar="N",
                       help="delete the runs started more than N days ago")
    prune.add_argument("--dry-run", "-C", "--check", action="store_true", dest="dry_run",
                       help="list the runs it would delete (as `opsrunner history` does) and delete nothing")
    _db_option(prune)
    show = sub.add_parser("show", help="one run: recap, failed and changed tasks, git commit")
    show.add_argument("run_id", metavar="RUN_ID",
                      help="a run id from `opsrunner history` (or a unique prefix, or suffix: its random part), "
                      "or `last`")
    show.add_argument("--json", action="store_true", help="JSON instead of text")
    _db_option(show)


def _db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", metavar="PATH_OR_URL", default=argparse.SUPPRESS,
                   help="history: a SQLite file or a postgresql:// URL (default $OPSRUNNER_HISTORY or "
                        "~/.local/state/opsrunner/history.db)")


def open_for_reading(location: str | None, dry_run: bool = False) -> HistoryStore:
    """The history at `location` (default: $OPSRUNNER_HISTORY or the user's file). A reader
    creates none: a missing file (a mistyped --history, or no run recorded yet) or a
    PostgreSQL database without opsrunner's schema is refused, naming it; only a run that
    records creates it. Any failure to open it (sqlite3.Error, psycopg.Error, OSError) is a
    CommandError naming it, password masked. `dry_run`: opened read-only, so nothing is
    written (no schema migrated, no kept outcome recorded)."""
    from opsrunner.history.backend import NoHistory
    from opsrunner.history.location import display, resolve, scrub
    from opsrunner.history.store import HistoryStore

    where = resolve(location)
    try:
        return HistoryStore(where, read_only=dry_run, create=False)
    except NoHistory as exc:
        creates = "a dry run creates none" if dry_run else "only a run creates it: opsrunner play, schedule run"
        raise CommandError(f"cannot read the run history {display(where)}: {exc} ({creates})") from None
    except Exception as exc:
        cause = scrub(f"{type(exc).__name__}: {str(exc).strip()}", where)
        if dry_run and "schema version" in cause:  # a read-only reader migrates nothing
            cause += " (a dry run does not migrate it: `opsrunner history` does)"
        raise CommandError(f"cannot read the run history {display(where)}: {cause}") from None


def _open(args: argparse.Namespace, dry_run: bool = False) -> HistoryStore:
    return open_for_reading(getattr(args, "history", None), dry_run)


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def duration(run: RunRow) -> str:
    if run.ended is None:
        return "-"
    secs = run.ended - run.started
    return f"{secs:.1f}s" if secs < 120 else f"{secs / 60:.1f}m"


def result(run: RunRow) -> str:
    text = run.result if run.exit_code is None else f"{run.result} ({run.exit_code})"
    incomplete = ", record incomplete" if run.record_gap and run.exit_code is not None else ""
    return text + (", dry run" if run.check_mode else "") + incomplete


def _commit(run: RunRow) -> str:
    if not run.git_commit:
        return "-"
    return run.git_commit[:10] + ("+dirty" if run.git_dirty else "")


def cmd_history(args: argparse.Namespace, out: IO[str]) -> int:
    if args.history_command == "prune":
        return _prune(args, out)
    if args.limit < 1:
        raise UsageError("-n must be at least 1")
    runs = _open(args).runs(args.playbook, args.host, args.failed, schedule=args.schedule, limit=args.limit,
                            with_tasks=args.json, group=args.group)
    if args.json:
        out.write(json.dumps([r.as_dict() for r in runs], indent=2) + "\n")
        return 0
    _table(runs, out)
    return 0


#: How many of the runs a dry-run prune would delete it lists, the newest and the oldest half.
PRUNE_SHOWN = 20


def _prune(args: argparse.Namespace, out: IO[str]) -> int:
    if args.keep_days < 0:
        raise UsageError("--keep-days must be 0 or more")
    store = _open(args, dry_run=args.dry_run)
    if not args.dry_run:
        removed, running = store.prune_runs(args.keep_days)
        kept = f"; kept {running} still running" if running else ""
        out.write(f"removed {removed} run(s) older than {args.keep_days:g} days from {store.path}{kept}\n")
        return 0
    doomed, running = store.prune_plan(args.keep_days)
    kept = f"; would keep {running} still running" if running else ""
    out.write(f"would remove {len(doomed)} run(s) older than {args.keep_days:g} days from {store.path}{kept} "
              "(dry run: nothing deleted)\n")
    half = PRUNE_SHOWN // 2
    if 0 < len(doomed) <= PRUNE_SHOWN:
        _table(store.runs_by_id(doomed), out)
    elif doomed:  # the newest and the oldest of them, with how many between
        _table(store.runs_by_id(doomed[-half:]) + store.runs_by_id(doomed[:half]), out,
               gap=(half, f"... {len(doomed) - 2 * half} more ..."))
    return 0


def _table(runs: list[RunRow], out: IO[str], gap: tuple[int, str] | None = None) -> None:
    """Runs as `opsrunner history` lists them; `gap`: a line written after that many runs."""
    rows = [("RUN ID", "STARTED", "DURATION", "RESULT", "HOSTS", "PLAYBOOK", "SCHEDULE", "GROUP", "COMMIT")]
    for r in runs:
        group = f"{r.run_group} ({r.slice})" if r.run_group and r.slice else r.run_group or "-"
        rows.append((r.id, when(r.started), duration(r), result(r), str(len(r.hosts)), Path(r.playbook).name,
                     r.schedule or "-", group, _commit(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
        if gap and i == gap[0]:
            out.write(gap[1] + "\n")


def cmd_show(args: argparse.Namespace, out: IO[str]) -> int:
    store = _open(args)
    run_id = store.last_run_id() if args.run_id == "last" else args.run_id
    run = store.run(run_id) if run_id else None
    if run is None:
        candidates = store.candidates(args.run_id, limit=11) if run_id else []
        if len(candidates) > 1:
            listed = "\n".join(f"  {c}" for c in candidates[:10]) + ("\n  ..." if len(candidates) > 10 else "")
            part = "prefix" if all(c.startswith(args.run_id) for c in candidates) else \
                "suffix" if all(c.endswith(args.run_id) for c in candidates) else "prefix or suffix"
            raise UsageError(f"run id {part} {args.run_id!r} is ambiguous; it matches:\n{listed}")
        raise UsageError(f"no single run matches {args.run_id!r} (see `opsrunner history`)")
    summary = None
    if run.run_group:
        from opsrunner.history.groups import summarize

        summary = summarize(run.run_group, store.group_runs(run.run_group))
    if args.json:
        data = run.as_dict()
        data["group"] = summary.__dict__ if summary else None
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    out.write(render_show(run, summary.describe() if summary else None))
    return 0


def render_show(run: RunRow, group: str | None = None) -> str:
    dirty = " (uncommitted changes)" if run.git_dirty else ""
    dry_run = ", dry run (--check: nothing was changed)" if run.check_mode else ""
    lines = [
        f"run {run.id}: {run.result}" + ("" if run.exit_code is None else f" (exit code {run.exit_code})") + dry_run,
        f"  started   {when(run.started)}, took {duration(run)}",
        f"  by        {run.user}@{run.controller}" + (f" (schedule {run.schedule})" if run.schedule else ""),
        f"  command   {run.command}",
        f"  playbook  {run.playbook}",
        f"  commit    {run.git_commit or 'not in a git repository'}{dirty}",
        f"  inventory {', '.join(run.inventory) or '(default)'}",
    ]
    if run.run_group:
        sliced = f", slice {run.slice}" if run.slice else ""
        lines.append(f"  group     {run.run_group}{sliced}: {group or 'no other run recorded'}")
    if run.extra_vars:
        lines.append(f"  extra vars {json.dumps(run.extra_vars, default=str)}")
    chosen = [f"{k} {', '.join(v) if isinstance(v, list) else v}" for k, v in run.options.items()
              if k in ("limit", "tags", "skip_tags") and v]
    if chosen:
        lines.append(f"  options   {'; '.join(chosen)}")
    if run.reason:  # why a run ended without its recap: bad input, no host to target, a refusal, an error
        first, *more = run.reason.splitlines() or [""]
        lines += [f"  reason    {first}", *(f"            {line}" for line in more)]
    if run.record_gap:  # its history failed during it: its end recorded later, its task results not all
        lines.append(f"  record    incomplete: {run.record_gap}")
    if run.exit_code is None and run.current_task:
        lines.append(f"  {'was in' if run.aborted else 'now in'}    {run.current_task}")
        for host, said in sorted(((run.in_flight or {}).get("so_far") or {}).items()):
            lines.append(f"  so far    [{host}] {str(said).splitlines()[0] if said else ''}")
    for note in run.notes:
        lines.append(f"  note      {note}")
    notable = [t for t in run.tasks if t.status not in ("ok", "skipped") or t.changed]
    if notable:
        lines.append("\nFAILED AND CHANGED TASKS")
        for t in notable:
            lines.append(f"  {t.status}: [{t.host}] {t.task} ({t.duration:.1f}s)")
            lines += ["      " + ln for ln in t.msg.splitlines()]
            for stream, text in (("stdout", t.stdout_tail), ("stderr", t.stderr_tail)):
                if text:  # a failed task's output: under a timer its console went nowhere
                    lines += [f"      {stream}:", *("        " + ln for ln in text.splitlines())]
    lines.append("\nRECAP")
    if not run.recap:
        lines.append("  (none: the run never reached its recap)" if run.exit_code is not None or run.aborted
                     else "  (none yet: the run is going on)")
    width = max((len(h) for h in run.recap), default=0)
    for host, c in run.recap.items():
        lines.append(f"  {host.ljust(width)} : " + " ".join(f"{k}={v}" for k, v in c.items()))
    return "\n".join(lines) + "\n"
