"""Reporters: the console (Ansible-like lines, colours on a TTY, a spinner for long tasks)
and JSON Lines events for other tools. Both subscribe to the same engine events."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from typing import IO, Any

from opsrunner.events import CommandSent, Event, Notice, PlayEnd, PlayStart, Recap, TaskEnd, TaskStart, TaskTitles
from opsrunner.results import Status, TaskResult, tail

COLOURS = {
    Status.OK: "32", Status.CHANGED: "33", Status.FAILED: "31", Status.TIMED_OUT: "35",
    Status.SKIPPED: "36", Status.UNREACHABLE: "31", Status.INTERRUPTED: "31",
}
SPINNER_AFTER_S = 1.0


class ConsoleReporter:
    def __init__(self, stream: IO[str] | None = None, verbosity: int = 0, colour: bool | None = None,
                 diff: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.verbosity = verbosity
        self.tty = self.stream.isatty()
        self.colour = self.tty if colour is None else colour
        self.diff = diff
        self._lock = threading.RLock()
        self._spinner: _Spinner | None = None
        self._held: list[str] = []
        self._width = (0, -1.0)  # (columns, when read): read again at most once a second
        self._run_shown = False
        # strategy free: which task's banner is up, and each task's title, so that a result of
        # another task than the last banner's is shown under its own banner (as ansible-core).
        self._banner_task: tuple[str, bool, str] | None = None  # (source, handler, title)
        self._free_titles: TaskTitles | None = None  # once a free play's task has started

    @property
    def run_shown(self) -> bool:
        """Whether the run's `run ID (opsrunner show ID)` line was written (as its play started)."""
        return self._run_shown

    # -- output helpers ---------------------------------------------------------------------
    def _paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    def _write(self, text: str, flush: bool = True) -> None:
        with self._lock:
            if not flush and not self.tty:  # a result line: written with the others at flush()
                self._held.append(text + "\n")
                return
            if self._spinner:
                self._spinner.clear()
            self.stream.write("".join(self._held) + text + "\n")
            self._held.clear()
            self.stream.flush()

    def _banner(self, title: str) -> None:
        columns, read_at = self._width
        if time.monotonic() - read_at > 1.0:  # a resized terminal is seen; not a query per task
            columns = shutil.get_terminal_size((80, 20)).columns
            self._width = (columns, time.monotonic())
        width = min(columns, 100)
        self._write("\n" + title + " " + "*" * max(3, width - len(title) - 1))

    # -- events -----------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        if isinstance(event, PlayStart):
            if event.run_id and not self._run_shown:  # once, as the first play starts: what to look up later
                self._run_shown = True
                self._write(f"run {event.run_id} (opsrunner show {event.run_id})")
            self._banner(f"PLAY [{event.play}]")
        elif isinstance(event, TaskStart):
            if event.strategy == "free":
                # As ansible-core's free strategy: the banner comes with a task's first result
                # (below), so no banner stands empty while the hosts are on other tasks.
                self._free_titles = self._free_titles or TaskTitles()
                self._free_titles.started(event)
                return
            self._stop_spinner()
            self._banner_task = (event.source, event.handler, event.task)
            kind = "RUNNING HANDLER" if event.handler else "TASK"
            self._banner(f"{kind} [{event.task}]")
            if self.verbosity >= 2 and event.source:
                self._write(f"task path: {event.source}")
            if self.tty:
                self._spinner = _Spinner(self, event.hosts)
        elif isinstance(event, TaskEnd):
            free = self._free_titles is not None and self._free_titles.knows(event)
            title = self._free_titles.title(event) if self._free_titles is not None and free else ""
            if free and (event.source, event.handler, title) != self._banner_task:
                self._stop_spinner()  # free: a result under its own banner (its host's title)
                self._banner_task = (event.source, event.handler, title)
                self._banner(f"{'RUNNING HANDLER' if event.handler else 'TASK'} [{title}]")
                if self.verbosity >= 2 and event.source:
                    self._write(f"task path: {event.source}")
            if self._spinner:
                self._spinner.done(event.host)
            # Into a pipe or file, results are flushed when the engine goes back to waiting on
            # hosts (flush()), not one by one: a flush per line cost ~1 ms at 200 hosts, the
            # main thread waiting for the GIL behind the host threads after each write.
            self._task_end(event)
            return
        elif isinstance(event, CommandSent):
            self._write(self._paint(f"<{event.host}> SENT: {event.command}", "34"))
        elif isinstance(event, Notice):
            prefix = f"[{event.host}] " if event.host else ""
            self._write(self._paint(f"NOTE: {prefix}{event.message}", "35"))
        elif isinstance(event, Recap):
            self._stop_spinner()
            self._recap(event)

    def _stop_spinner(self) -> None:
        if self._spinner:
            self._spinner.stop()
            self._spinner = None

    def _task_end(self, event: TaskEnd) -> None:
        r = event.result
        for item in r.items:
            shown = item.item if item.label is None else item.label
            self._line(event.host, item, f" => (item={_short(shown)})")
        self._line(event.host, r, "")

    def _line(self, host: str, r: TaskResult, suffix: str) -> None:
        label = {
            Status.OK: "ok", Status.CHANGED: "changed", Status.SKIPPED: "skipping",
            Status.FAILED: "fatal", Status.UNREACHABLE: "fatal", Status.TIMED_OUT: "fatal",
            Status.INTERRUPTED: "interrupted",
        }[r.status]
        head = f"{label}: [{host}]"
        if r.status == Status.FAILED:
            head += ": FAILED!"
        elif r.status == Status.UNREACHABLE:
            head += ": UNREACHABLE!"
        elif r.status == Status.TIMED_OUT:
            head += ": TIMED OUT!"
        elif r.status == Status.INTERRUPTED:
            head += ": INTERRUPTED!"
        text = head + suffix
        body = self._body(r)
        if body:
            text += " => " + body
        self._write(self._paint(text, COLOURS[r.status]), flush=False)
        for warning in r.warnings if not suffix else ():  # a loop's warnings: once, on its summary line
            self._write(self._paint(f"[WARNING]: [{host}] {warning}", "35"), flush=False)
        if self.diff and r.diff:
            self._write(r.diff.rstrip("\n"), flush=False)
        if r.failed and r.ignored:
            self._write(self._paint("...ignoring", "36"), flush=False)

    def _body(self, r: TaskResult) -> str:
        parts = []
        if r.msg and (r.failed or r.status != Status.SKIPPED or self.verbosity):
            parts.append(r.msg)
        if r.failed or self.verbosity >= 1:
            if r.rc not in (None, 0):
                parts.append(f"rc={r.rc}")
            if r.stdout.strip() and (r.failed or self.verbosity >= 1):
                parts.append("stdout:\n" + _indent(tail(r.stdout, 20)))
            if r.stderr.strip():
                parts.append("stderr:\n" + _indent(tail(r.stderr, 20)))
        # Notes say what happened besides the result (e.g. the remote agent was restarted).
        parts.extend(f"[note: {note}]" for note in r.data.get("notes", []) if note not in r.msg)
        if self.verbosity >= 1:
            parts.append(f"({r.duration_s:.2f}s)")
        return "\n".join(parts) if any("\n" in p for p in parts) else " ".join(parts)

    def _recap(self, event: Recap) -> None:
        self._banner("PLAY RECAP")
        names = event.summary.stats
        width = max((len(n) for n in names), default=0)
        lines = []
        for host, s in names.items():
            code = "31" if s.failed or s.unreachable else ("33" if s.changed else "32")
            counts = (f"ok={s.ok:<4} changed={s.changed:<4} unreachable={s.unreachable:<4} "
                      f"failed={s.failed:<4} skipped={s.skipped:<4} rescued={s.rescued:<4} "
                      f"ignored={s.ignored}")
            lines.append(f"{self._paint(host.ljust(width), code)} : {counts}")
        if lines:  # one write: a flush per host line waits for the GIL each time at 50 hosts
            self._write("\n".join(lines))
        if event.summary.interrupted:
            by = "SIGTERM" if event.summary.signal == "SIGTERM" else "the user"
            self._write(self._paint(f"interrupted: run stopped by {by}{during(event.summary.in_flight)}", "31"))

    def flush(self) -> None:
        with self._lock:
            if self._held:  # one write for the lot: each write waits for the GIL at 200 hosts
                self.stream.write("".join(self._held))
                self._held.clear()
            self.stream.flush()

    def close(self) -> None:
        self._stop_spinner()
        self.flush()


class _Spinner:
    """Shows elapsed time and still-running hosts for tasks that take long (TTY only)."""

    FRAMES = "|/-\\"

    def __init__(self, reporter: ConsoleReporter, hosts: list[str]) -> None:
        self.reporter = reporter
        self.pending = list(hosts)
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._shown = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        frame = 0
        while not self._stop.wait(0.25):
            elapsed = time.monotonic() - self.start
            if elapsed < SPINNER_AFTER_S or not self.pending:
                continue
            with self.reporter._lock:
                if self._stop.is_set():
                    return
                hosts = ", ".join(self.pending[:3]) + (" ..." if len(self.pending) > 3 else "")
                line = f"{self.FRAMES[frame % 4]} {elapsed:5.1f}s running on {hosts}"
                self.reporter.stream.write("\r\033[K" + line[:120])
                self.reporter.stream.flush()
                self._shown = True
                frame += 1

    def clear(self) -> None:
        if self._shown:
            self.reporter.stream.write("\r\033[K")
            self._shown = False

    def done(self, host: str) -> None:
        if host in self.pending:
            self.pending.remove(host)

    def stop(self) -> None:
        self._stop.set()
        with self.reporter._lock:
            self.clear()


class JsonEventsReporter:
    """JSON Lines: one object per event (the format is a documented contract)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._current_play = ""
        self._titles = TaskTitles()

    def handle(self, event: Event) -> None:
        record = self._record(event)
        if record is not None:
            self.stream.write(json.dumps(record, default=str) + "\n")
            if not isinstance(event, TaskEnd):  # results: at flush(), as the console's
                self.stream.flush()

    def flush(self) -> None:
        self.stream.flush()

    def _record(self, event: Event) -> dict[str, Any] | None:
        if isinstance(event, PlayStart | PlayEnd):
            return {"event": "play_start" if isinstance(event, PlayStart) else "play_end", "time": event.time,
                    "play": event.play, "hosts": event.hosts, "run_id": event.run_id}
        if isinstance(event, TaskStart):
            self._titles.started(event)  # task_end carries the same (templated) name
            return {"event": "task_start", "time": event.time, "play": event.play, "task": event.task,
                    "module": event.module, "hosts": event.hosts, "handler": event.handler}
        if isinstance(event, TaskEnd):
            r = event.result
            return {
                "event": "handler_end" if event.handler else "task_end",
                "time": event.time, "play": event.play, "task": self._titles.title(event), "host": event.host,
                "module": event.module, "status": str(r.status), "changed": r.changed,
                "ignored": r.ignored, "duration_s": round(r.duration_s, 4), "rc": r.rc, "msg": r.msg,
                "stdout_tail": tail(r.stdout, 20), "stderr_tail": tail(r.stderr, 20), "warnings": r.warnings,
                "data": {k: v for k, v in r.data.items() if k not in ("cmd",)},
                "items": [{"item": i.item, "status": str(i.status), "msg": i.msg,
                           "data": {k: v for k, v in i.data.items() if k not in ("cmd",)}} for i in r.items],
            }
        if isinstance(event, Recap):
            return {"event": "recap", "time": event.time, "interrupted": event.summary.interrupted,
                    "signal": event.summary.signal or None,
                    "in_flight": [{"host": h, "task": t} for h, t in event.summary.in_flight],
                    "hosts": {h: s.as_dict() for h, s in event.summary.stats.items()}}
        return None

    def close(self) -> None:
        self.stream.close()  # flushes


def during(in_flight: list[tuple[str, str]]) -> str:
    """` during 'TASK' on HOST, HOST2; 'TASK2' on HOST3`: the tasks an interrupt cut short."""
    hosts: dict[str, list[str]] = {}
    for host, task in in_flight:
        hosts.setdefault(task, []).append(host)
    shown = [f"'{task}' on {', '.join(names[:5])}{f' and {len(names) - 5} more' if len(names) > 5 else ''}"
             for task, names in hosts.items()]
    return f" during {'; '.join(shown)}" if shown else ""


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
