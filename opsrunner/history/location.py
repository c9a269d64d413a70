"""Where the run history lives: a SQLite file (the default) or a PostgreSQL URL.

No database driver is imported here: `opsrunner play` pays for psycopg only when its
history is a postgresql:// URL."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
MASK = "***"


def is_postgres(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def default_path() -> Path:
    """The SQLite file of this user: $OPSRUNNER_HISTORY (when a path) or ~/.local/state/opsrunner/history.db."""
    env = os.environ.get("OPSRUNNER_HISTORY")
    if env and not is_postgres(env):
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "opsrunner" / "history.db"


def default_location() -> str:
    """$OPSRUNNER_HISTORY as given (a path or a postgresql:// URL), else the default file."""
    env = os.environ.get("OPSRUNNER_HISTORY")
    return env if env and is_postgres(env) else str(default_path())


def resolve(location: str | Path | None) -> str:
    """A --history value (path or URL) as one string: a URL as given, a path made absolute
    (a scheduled run changes directory before it records)."""
    if location is None or location == "":
        return default_location()
    if is_postgres(str(location)):
        return str(location)
    return str(Path(location).expanduser().absolute())


def passwords_of(location: str) -> list[str]:
    """The secrets a URL carries (its password, a password= parameter): never shown."""
    if not is_postgres(location):
        return []
    parts = urlsplit(location)
    found = [parts.password] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k == "password" and v]
    return found + [unquote(p) for p in found if unquote(p) != p]  # as written and as libpq reads it


def display(location: str | Path) -> str:
    """The location as messages and the dashboard show it: a URL's password as ***."""
    text = str(location)
    if not is_postgres(text):
        return text
    parts = urlsplit(text)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{host}"
    query = urlencode([(k, MASK if k == "password" else v) for k, v in parse_qsl(parts.query)], safe="*/:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, location: str | Path) -> str:
    """`text` (an error message, a command line) with every password of `location` masked,
    and any other postgresql URL's password too."""
    for secret in passwords_of(str(location)):
        text = text.replace(secret, MASK)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


_URL_PASSWORD = re.compile(r"((?:postgresql|postgres)://[^:/@\s]*:)[^@\s]*@")
