"""Schedules as small YAML files, one per name (reviewable; the folder can live in git).

The folder is `--schedules DIR`, else $OPSRUNNER_SCHEDULES, else ~/.config/opsrunner/schedules.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from opsrunner.errors import Problem, SourcePos, UsageError, ValidationError
from opsrunner.schedule.spec import SpecError, parse_calendar

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
NOTIFY_ON = ("failure", "recovery", "always")  # as notify.NOTIFY_ON (that module imports apprise's helpers)
HEADER = ("# opsrunner schedule, written by `opsrunner schedule add`. Review it like the playbook;\n"
          "# `opsrunner schedule run {name}` runs exactly what its timer runs.\n")


def schedules_dir(option: str | None = None) -> Path:
    if option:
        return Path(option).expanduser().resolve()
    env = os.environ.get("OPSRUNNER_SCHEDULES")
    if env:
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "opsrunner" / "schedules"


@dataclass
class Schedule:
    name: str
    project: str
    playbook: str
    #: The OnCalendar expression (also of a cron expression installed as a systemd timer).
    on_calendar: str = ""
    every: str | None = None
    inventory: list[str] = field(default_factory=list)
    extra_vars: list[str] = field(default_factory=list)
    limit: str | None = None
    #: `-t` and `--skip-tags`, as given to `add` (each a tag or a comma-separated list).
    tags: list[str] = field(default_factory=list)
    skip_tags: list[str] = field(default_factory=list)
    git_pull: bool = False
    notify: list[str] = field(default_factory=list)
    notify_on: str = "failure"
    randomized_delay: int = 60
    installer: str = "systemd"
    #: The dashboard's address (`opsrunner serve`): alerts link to the run's page there.
    dashboard: str | None = None
    #: A 5-field cron expression `--at` was given (its next runs are croniter's).
    cron: str | None = None
    #: The unit directory `--unit-dir` installed the units in (remove finds them there).
    unit_dir: str | None = None
    #: The crontab file $OPSRUNNER_CRONTAB named at add: the line is there (remove finds it there).
    crontab_file: str | None = None
    #: The run history its runs are recorded in (`--history` or $OPSRUNNER_HISTORY at add): a
    #: SQLite file or a postgresql:// URL, without its password (opsrunner stores none).
    history: str | None = None

    @property
    def spec(self) -> str:
        """When it runs, as it was said: `--every 15m`, the cron expression or the OnCalendar one."""
        return f"--every {self.every}" if self.every else self.cron or self.on_calendar

    def next_run(self, after: dt.datetime | None = None) -> dt.datetime | None:
        """When it runs next; None when no date matches (`0 3 31 2 *`: it never runs)."""
        now = after or dt.datetime.now().replace(microsecond=0)
        try:
            if self.cron:
                from opsrunner.schedule.cron import parse_cron

                return parse_cron(self.cron).next_run(now)
            return parse_calendar(self.on_calendar).next_run(now)
        except (ValueError, OverflowError):  # SpecError too: a file edited by hand is listed, never a crash
            return None

    def history_location(self) -> str | None:
        """The run history its runs go to, as `add` recorded it (None: the runner's default); a
        relative path (a file edited by hand) is the project's, as its other paths."""
        from opsrunner.history.location import is_postgres

        if not self.history or is_postgres(self.history):
            return self.history or None
        path = Path(self.history).expanduser()
        return str(path if path.is_absolute() else Path(self.project) / path)

    def play_args(self) -> list[str]:
        """The `opsrunner play` arguments of one run (run in `project`)."""
        args = [self.playbook]
        for inv in self.inventory:
            args += ["-i", inv]
        for ev in self.extra_vars:
            args += ["-e", ev]
        if self.limit:
            args += ["-l", self.limit]
        return args + self.tag_args()

    def tag_args(self) -> list[str]:
        """Its tag selection as `play` takes it (and `schedule list` shows it)."""
        return ([f"--tags={','.join(self.tags)}"] if self.tags else []) + \
            ([f"--skip-tags={','.join(self.skip_tags)}"] if self.skip_tags else [])


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(f"bad schedule name {name!r}: letters, digits, '-' and '_' (up to 64), "
                         "starting with a letter or digit")
    return name


def path_of(folder: Path, name: str) -> Path:
    return folder / f"{check_name(name)}.yml"


def save(folder: Path, schedule: Schedule) -> Path:
    """The schedule file, readable by its owner only (0600, in a 0700 folder): it holds what
    the run needs, secrets too (`-e db_password=...`, webhook URLs)."""
    _private_folder(folder)
    path = path_of(folder, schedule.name)
    data = {k: v for k, v in asdict(schedule).items() if v not in (None, [], "")}
    text = HEADER.format(name=schedule.name) + yaml.safe_dump(data, sort_keys=False)
    tmp = path.with_suffix(".yml.tmp")
    tmp.unlink(missing_ok=True)  # left by a crash, perhaps with another mode: made anew
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # whatever the umask
        f.write(text)
    tmp.replace(path)
    return path


def _private_folder(folder: Path) -> None:
    """The schedules folder, 0700: made so, and one of ours made before made so too."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid == os.geteuid() and folder.stat().st_mode & 0o077:
        folder.chmod(0o700)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "project": str, "playbook": str, "on_calendar": str, "every": str, "inventory": list,
    "extra_vars": list, "limit": str, "tags": list, "skip_tags": list, "git_pull": bool, "notify": list,
    "notify_on": str, "randomized_delay": int, "installer": str, "dashboard": str, "cron": str, "unit_dir": str,
    "crontab_file": str, "history": str,
}


def load(folder: Path, name: str) -> Schedule:
    path = path_of(folder, name)
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yml"))) or "none"
        raise UsageError(f"no schedule named {name!r} in {folder} (known: {known})")
    return load_file(path)


def load_file(path: Path) -> Schedule:
    from opsrunner.yamlsource import PosDict, load_yaml_file

    data = load_yaml_file(path)

    def bad(message: str, key: str = "") -> ValidationError:
        pos = data.at(key) if isinstance(data, PosDict) else SourcePos(str(path))
        return ValidationError([Problem(pos, message, key)])

    if not isinstance(data, dict):
        raise bad("a schedule file must be a mapping")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _TYPES:
            raise bad(f"unknown key {key!r} (expected one of: {', '.join(_TYPES)})", str(key))
        if value is not None and not isinstance(value, _TYPES[key]):
            raise bad(f"{key} must be {_TYPES[key].__name__}", str(key))  # type: ignore[union-attr]
        values[str(key)] = value
    for key in ("name", "project", "playbook"):
        if not values.get(key):
            raise bad(f"missing required key {key!r}")
    if not values.get("on_calendar") and not values.get("cron"):
        raise bad("missing required key 'on_calendar' (or 'cron')")
    if values["name"] != path.stem:
        raise bad(f"name {values['name']!r} does not match the file name {path.name}", "name")
    if values.get("notify_on", "failure") not in NOTIFY_ON:
        raise bad(f"notify_on must be one of {', '.join(NOTIFY_ON)}", "notify_on")
    for key in ("on_calendar", "cron"):
        try:
            if values.get(key):
                _parse_when(key, values[key])
        except SpecError as exc:
            raise bad(str(exc), key) from None
    return Schedule(**values)


def _parse_when(key: str, text: str) -> None:
    if key == "cron":
        from opsrunner.schedule.cron import parse_cron

        parse_cron(text)
    else:
        parse_calendar(text)


def all_schedules(folder: Path) -> list[Schedule]:
    return [load_file(p) for p in sorted(folder.glob("*.yml"))] if folder.is_dir() else []


@dataclass
class Listed:
    """A schedule file as `schedule list` and the dashboard show it: its schedule, or for one
    that does not load (edited by hand), what salvage() reads of it and why it does not load."""

    schedule: Schedule
    error: str | None = None


def scan(folder: Path) -> list[Listed]:
    """Every schedule file of the folder, by name; one that does not load hides no other."""
    found = []
    for path in sorted(folder.glob("*.yml")) if folder.is_dir() else []:
        try:
            found.append(Listed(load_file(path)))
        except (ValidationError, OSError, UnicodeError) as exc:
            found.append(Listed(salvage(path), problem_text(exc)))
    return found


def problem_text(exc: Exception) -> str:
    """Why a schedule file does not load, as one line: `nightly.yml:14:1: ... (at key)`."""
    if isinstance(exc, ValidationError) and exc.problems:
        return "; ".join(str(p) for p in exc.problems)
    return f"{type(exc).__name__}: {exc}"


def salvage(path: Path, kept: dict[str, Any] | None = None) -> Schedule:
    """Best effort: what a schedule file that does not load still says, each key of the right
    type kept (its notify URLs, its history, its project and playbook), the others left at
    their defaults; its name is the file's. Never raises (an unreadable file: the name alone).
    `kept`: salvaged_keys(path), where the caller read them already."""
    return Schedule(**{"name": path.stem, "project": "", "playbook": "",
                       **(salvaged_keys(path) if kept is None else kept)})


def salvaged_keys(path: Path) -> dict[str, Any]:
    """The keys salvage() keeps of a schedule file (each of the right type), but its name."""
    try:
        text = path.read_text(encoding="utf-8")
    except Exception:  # whatever the file holds: nothing more is known of it
        text = ""
    try:
        data = yaml.safe_load(text)
    except Exception:
        data = _loadable_keys(text)
    values: dict[str, Any] = {}
    for key, value in (data.items() if isinstance(data, dict) else ()):
        if key == "name" or key not in _TYPES or not isinstance(value, _TYPES[key]):
            continue
        if isinstance(value, list):
            value = [v for v in value if isinstance(v, str)]
        values[str(key)] = value
    return values


_TOP_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*:")


def _loadable_keys(text: str) -> dict[str, Any]:
    """A schedule file that is no YAML (a line broken by hand): each top-level key that still
    loads on its own, with the lines under it (save() writes one key a line, a list's items
    below it), so that what it says of where it is installed is not lost with the one line."""
    chunks: list[list[str]] = []
    for line in text.splitlines():
        if _TOP_KEY.match(line):
            chunks.append([line])
        elif chunks and line[:1] in (" ", "-", "\t"):
            chunks[-1].append(line)
    found: dict[str, Any] = {}
    for chunk in chunks:
        try:
            data = yaml.safe_load("\n".join(chunk))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict):
            found.update(data)
    return found
