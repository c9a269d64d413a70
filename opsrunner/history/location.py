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
    netloc = _user_at_host(parts.netloc, MASK) if parts.password is not None else parts.netloc
    query = urlencode([(k, MASK if k == "password" else v) for k, v in parse_qsl(parts.query)], safe="*/:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def without_password(location: str) -> str:
    """A postgresql:// URL without its password (in the user part or a password= parameter),
    the rest as given; a path as it is. opsrunner stores no history password anywhere (a
    schedule file keeps this form)."""
    if not is_postgres(location):
        return location
    parts = urlsplit(location)
    netloc = _user_at_host(parts.netloc, None) if "@" in parts.netloc else parts.netloc
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k == "password" for k, _ in pairs):
        query = urlencode([(k, v) for k, v in pairs if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _user_at_host(netloc: str, password: str | None) -> str:
    """`user:PASSWORD@host` of a URL's `user[:secret]@host`; without a password, `user@host`."""
    userinfo, host = netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return f"{user}:{password}@{host}" if password is not None else f"{user}@{host}"


def scrub(text: str, location: str | Path) -> str:
    """`text` (an error message, a command line) with every password of `location` masked,
    and any other postgresql URL's password too."""
    for secret in passwords_of(str(location)):
        text = text.replace(secret, MASK)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text)


_URL_PASSWORD = re.compile(r"((?:postgresql|postgres)://[^:/@\s]*:)[^@\s]*@")
