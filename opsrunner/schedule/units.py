"""What a schedule installs: a systemd .service + .timer pair, or a crontab entry.

Where units go: `--unit-dir DIR` or $OPSRUNNER_UNIT_DIR (written only: nothing is
activated, for review, packaging and tests), else /etc/systemd/system as root or
~/.config/systemd/user otherwise (written, then `systemctl [--user] daemon-reload` and
`enable --now` the timer). Cron: $OPSRUNNER_CRONTAB names a file to edit instead of
the user's crontab (same purpose: written only, no cron reads it, so nothing is active).
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from opsrunner.errors import OpsrunnerError
from opsrunner.schedule.spec import parse_calendar, to_cron
from opsrunner.schedule.store import Schedule

CRON_TAG = "# opsrunner-schedule:"


class InstallError(OpsrunnerError):
    """systemctl or crontab refused; nothing half-installed is left behind where avoidable."""

    exit_code = 1


def unit_name(name: str) -> str:
    return f"opsrunner-{name}"


@dataclass(frozen=True)
class UnitTarget:
    folder: Path
    activate: bool  # only the real unit folders are activated through systemctl
    user: bool

    @classmethod
    def choose(cls, option: str | None) -> UnitTarget:
        custom = option or os.environ.get("OPSRUNNER_UNIT_DIR")
        user = os.geteuid() != 0
        if custom:
            return cls(Path(custom).expanduser().resolve(), False, user)
        if not user:
            return cls(Path("/etc/systemd/system"), True, False)
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return cls(Path(base) / "systemd" / "user", True, True)


def _systemd_word(word: str) -> str:
    """One ExecStart= argument: specifiers (%) and variables ($) escaped, quoted if needed."""
    escaped = word.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./$-]+", escaped):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run_argv(schedule: Schedule, schedules: Path) -> list[str]:
    """What the timer (or cron) runs: exactly `opsrunner schedule run NAME`, with the opsrunner
    that `add` runs with. `-P`: the run's working directory, the project, is not put on sys.path,
    so an `opsrunner/` folder there (the project being an opsrunner checkout) is not imported."""
    return [sys.executable, "-P", "-m", "opsrunner", "schedule", "run", schedule.name, "--schedules", str(schedules)]


def render_service(schedule: Schedule, schedules: Path, system: bool) -> str:
    lines = [
        f"# Written by `opsrunner schedule add {schedule.name}`; the schedule is {schedules / schedule.name}.yml",
        "[Unit]",
        f"Description=opsrunner schedule {schedule.name} ({schedule.playbook})",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        # When the run ends only its own process is stopped: the jobs it launched on a
        # `connection: local` host live in this unit's cgroup and must outlive it. A stop while
        # a run goes on is a SIGTERM to opsrunner, which stops its in-flight commands itself.
        "KillMode=process",
        # A path setting: taken verbatim to the end of the line (quotes would be part of it).
        f"WorkingDirectory={schedule.project.replace('%', '%%')}",
        "ExecStart=" + " ".join(_systemd_word(w) for w in run_argv(schedule, schedules)),
    ]
    if system:
        lines.append(f"User={getpass.getuser()}")
    return "\n".join(lines) + "\n"


def render_timer(schedule: Schedule) -> str:
    return "\n".join([
        f"# Written by `opsrunner schedule add {schedule.name}`",
        "[Unit]",
        f"Description=Timer of opsrunner schedule {schedule.name}",
        "",
        "[Timer]",
        f"OnCalendar={schedule.on_calendar}",
        "Persistent=true",
        f"RandomizedDelaySec={schedule.randomized_delay}",
        f"Unit={unit_name(schedule.name)}.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
    ])


def cron_line(schedule: Schedule, schedules: Path) -> str:
    fields = schedule.cron or to_cron(parse_calendar(schedule.on_calendar))  # a cron expression: as written
    command = f"cd {shlex.quote(schedule.project)} && {shlex.join(run_argv(schedule, schedules))}"
    return f"{fields} {command.replace('%', chr(92) + '%')} {CRON_TAG}{schedule.name}"


def _systemctl(target: UnitTarget, *args: str) -> None:
    argv = ["systemctl", *(["--user"] if target.user else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise InstallError(f"{shlex.join(argv)} failed: {proc.stderr.strip() or proc.stdout.strip()}")


def no_systemd(crontab: bool) -> str:
    """Why a timer cannot be installed here, and every way forward this machine has."""
    if crontab:
        return "systemd is not running here: use --cron, or --unit-dir DIR to only write the units"
    return ("systemd is not running here, and crontab is not installed either (no crontab command): use --unit-dir "
            "DIR to only write the units, or --cron with $OPSRUNNER_CRONTAB=FILE to only write the crontab line to "
            "FILE (nothing runs either until it is installed elsewhere), or install cron and use --cron")


def no_crontab(systemd: bool, adding: bool = True) -> str:
    """Why a crontab line cannot be written here (`add --cron`, or `remove` of a cron
    schedule), and every way forward this machine has."""
    if not adding:
        return ("crontab is not installed here (no crontab command): install cron, or set $OPSRUNNER_CRONTAB=FILE "
                "to the file its line was written to")
    if systemd:
        return ("crontab is not installed here (no crontab command): install cron, or leave out --cron for a "
                "systemd timer, or set $OPSRUNNER_CRONTAB=FILE to only write the crontab line to FILE")
    return ("crontab is not installed here (no crontab command), and systemd is not running either: install cron, "
            "or set $OPSRUNNER_CRONTAB=FILE to only write the crontab line to FILE, or leave out --cron and use "
            "--unit-dir DIR to only write a timer's units (nothing runs either until it is installed elsewhere)")


def check_installable(cron: bool, target: UnitTarget | None, adding: bool = True) -> None:
    """InstallError where this machine cannot install the schedule: checked before anything
    is written. The message names what is missing and what can be done instead."""
    if cron and not _crontab_usable():
        raise InstallError(no_crontab(_systemd_running(), adding))
    if not cron and target is not None and target.activate and not _systemd_running():
        raise InstallError(no_systemd(_crontab_usable()))


def _crontab_usable() -> bool:
    return crontab_file() is not None or shutil.which("crontab") is not None


def _systemd_running() -> bool:
    return bool(shutil.which("systemctl")) and Path("/run/systemd/system").is_dir()


def install_systemd(schedule: Schedule, schedules: Path, target: UnitTarget) -> list[Path]:
    if target.activate and not _systemd_running():
        raise InstallError(no_systemd(_crontab_usable()))
    target.folder.mkdir(parents=True, exist_ok=True)
    base = target.folder / unit_name(schedule.name)
    service, timer = base.with_suffix(".service"), base.with_suffix(".timer")
    service.write_text(render_service(schedule, schedules, system=not target.user), encoding="utf-8")
    timer.write_text(render_timer(schedule), encoding="utf-8")
    if target.activate:
        _systemctl(target, "daemon-reload")
        _systemctl(target, "enable", "--now", timer.name)
    return [service, timer]


def timer_stamp(name: str, target: UnitTarget) -> Path:
    """Where systemd keeps the last trigger time of the Persistent= timer (made when it starts)."""
    if target.user:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "systemd" / "timers" / f"stamp-{unit_name(name)}.timer"
    return Path("/var/lib/systemd/timers") / f"stamp-{unit_name(name)}.timer"


def remove_systemd(name: str, target: UnitTarget) -> list[Path]:
    base = target.folder / unit_name(name)
    files = [p for p in (base.with_suffix(".timer"), base.with_suffix(".service")) if p.exists()]
    if target.activate and files:
        _systemctl(target, "disable", "--now", files[0].name)
    for f in files:
        f.unlink()
    if target.activate and files:
        _systemctl(target, "daemon-reload")
    # Left behind, the stamp outlives the schedule: one added again under the same name would
    # run at once for every time that passed since (Persistent=). `systemctl clean` needs D-Bus.
    stamp = timer_stamp(name, target)
    if target.activate and stamp.exists():
        stamp.unlink()
        files.append(stamp)
    return files


#: A schedule's `crontab_file` where its line went to the user's crontab (through `crontab`).
USER_CRONTAB = "crontab"


def _read_crontab(recorded: str | None = None) -> tuple[list[str], Path | None]:
    """The crontab's lines and its file: the one a schedule was `recorded` in at add (the
    user's crontab where that is USER_CRONTAB), else (a schedule from before this was
    recorded) $OPSRUNNER_CRONTAB's, else None (the user's crontab, through `crontab`)."""
    path = None if recorded == USER_CRONTAB else Path(recorded) if recorded else crontab_file()
    if path is not None:
        return (path.read_text().splitlines() if path.exists() else []), path
    check_installable(True, None, adding=False)  # `add` checked first, with its own ways forward
    proc = subprocess.run(["crontab", "-l"], capture_output=True, text=True, timeout=30)
    return (proc.stdout.splitlines() if proc.returncode == 0 else []), None


def _write_crontab(lines: list[str], path: Path | None) -> None:
    text = "\n".join(lines) + ("\n" if lines else "")
    if path is not None:
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:  # its folder missing, say: said as such, not a traceback
            raise InstallError(f"cannot write the crontab file {path}: {exc.strerror}") from None
        return
    proc = subprocess.run(["crontab", "-"], input=text, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise InstallError(f"crontab - failed: {proc.stderr.strip()}")


def install_cron(schedule: Schedule, schedules: Path) -> str:
    line = cron_line(schedule, schedules)
    lines, path = _read_crontab()
    lines = [ln for ln in lines if not ln.endswith(CRON_TAG + schedule.name)] + [line]
    _write_crontab(lines, path)
    return str(path) if path else "the user's crontab"


def remove_cron(name: str, recorded: str | None = None) -> tuple[bool, str]:
    """Take the schedule's line out of its crontab: whether there was one, and which crontab
    was looked in (as install_cron names it)."""
    lines, path = _read_crontab(recorded)
    kept = [ln for ln in lines if not ln.endswith(CRON_TAG + name)]
    if len(kept) != len(lines):
        _write_crontab(kept, path)
    return len(kept) != len(lines), str(path) if path else "the user's crontab"


def crontab_file() -> Path | None:
    """$OPSRUNNER_CRONTAB: the file a crontab line is only written to (no cron reads it), or None:
    the user's crontab."""
    custom = os.environ.get("OPSRUNNER_CRONTAB")
    return Path(custom) if custom else None


def timer_active(schedule: Schedule) -> bool:
    """Whether the schedule's timer (or crontab line) is installed and active here. Units
    written to a custom unit directory ($OPSRUNNER_UNIT_DIR) are never activated, nor is a
    line written to a crontab file ($OPSRUNNER_CRONTAB): no cron reads it."""
    if schedule.installer == "cron":
        recorded = schedule.crontab_file
        if recorded != USER_CRONTAB and (recorded or crontab_file() is not None):
            return False  # a crontab file: no cron reads it
        try:
            lines, _ = _read_crontab(recorded)
        except (OSError, subprocess.SubprocessError, InstallError):  # no crontab here: nothing runs it
            return False
        # a line commented out (`# 0 3 * * * ...`) is one cron does not run
        return any(ln.endswith(CRON_TAG + schedule.name) and not ln.lstrip().startswith("#") for ln in lines)
    if os.environ.get("OPSRUNNER_UNIT_DIR") or not _systemd_running():
        return False
    user = os.geteuid() != 0
    argv = ["systemctl", *(["--user"] if user else []), "is-active", "--quiet", f"{unit_name(schedule.name)}.timer"]
    try:
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
