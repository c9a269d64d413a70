"""Alerts through apprise: one URL syntax for Slack, Teams, Discord, email (mailto://),
ntfy, Telegram, JSON webhooks (json://) and many more (https://github.com/caronc/apprise).

A URL is checked when the schedule is added (apprise must know it). A delivery is tried
ATTEMPTS times with backoff; a failed alert is reported, never raised. apprise is imported
only when a URL is checked or an alert is sent."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opsrunner.schedule.changes import changes_lines

ATTEMPTS = 3
BACKOFF_S = 1.0
#: How many of the log's last lines an alert quotes per failed host.
LOG_LINES = 5
NOTIFY_ON = ("failure", "recovery", "always")


def resolve(url: str) -> str:
    """The apprise URL of a --notify value. apprise has no schema for a plain web hook, which
    --notify has always taken (a JSON POST): an http(s) URL that no apprise service claims is
    posted as JSON (apprise's json:// and jsons://)."""
    import apprise

    if re.match(r"^https?://", url, re.I) and apprise.Apprise.instantiate(url, suppress_exceptions=True) is None:
        return _as_json(url)
    return url


def _as_json(url: str) -> str:
    """A plain web hook as apprise's json:// URL. Its query is the hook's own (`?token=...`):
    each parameter becomes one apprise sends as a GET parameter (`-token=...`), so it is
    posted to with the query it was given, never read as one of apprise's options."""
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    pairs = [(f"-{k}", v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    query = urlencode(pairs, quote_via=quote)  # a blank as %20: apprise reads a + as itself
    return urlunsplit(("jsons" if parts.scheme.lower() == "https" else "json", parts.netloc, parts.path, query, ""))


def check_url(url: str) -> str | None:
    """Why apprise cannot use this URL; None when it can."""
    import apprise

    with _apprise_log() as log:
        plugin = apprise.Apprise.instantiate(resolve(url), suppress_exceptions=True)
    if plugin is not None:
        return None
    return "; ".join(log.lines(logging.WARNING)) or "not a URL apprise knows"


class _ThisThread(logging.Handler):
    """The apprise records of the thread that made it. apprise logs to one process-wide
    logger: alerts sent at once from other threads log there too, and their reasons must
    not be taken for this one's."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        thread = threading.get_ident()
        self.addFilter(lambda record: record.thread == thread)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, level: int, only: bool = False) -> list[str]:
        """The non-blank lines of the records at `level` and above (`only`: at `level`)."""
        return [line for r in self.records if r.levelno == level or (r.levelno > level and not only)
                for line in r.getMessage().splitlines() if line.strip()]


#: How many captures are going on (in any thread), and the apprise logger's level before the
#: first: the level goes back when the last ends, not when the first does.
_captures = {"count": 0, "level": logging.NOTSET}
_captures_lock = threading.Lock()


@contextmanager
def _apprise_log() -> Iterator[_ThisThread]:
    """What apprise logs in this thread meanwhile, DEBUG too (the socket error of a failed
    delivery is logged only at DEBUG, below its generic warning)."""
    logger = logging.getLogger("apprise")
    handler = _ThisThread()
    with _captures_lock:
        if _captures["count"] == 0:
            _captures["level"] = logger.level
            if logger.getEffectiveLevel() > logging.DEBUG:
                logger.setLevel(logging.DEBUG)
        _captures["count"] += 1
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        with _captures_lock:
            logger.removeHandler(handler)
            _captures["count"] -= 1
            if _captures["count"] == 0:
                logger.setLevel(_captures["level"])


#: How a label shows the value of a web hook's query parameter (apprise's mask of a password).
QUERY_MASK = "****"
#: A token shorter than this is shown as HIDDEN, never as its first and last character (apprise's
#: privacy form, `a...b`), which would show all of it, or add what it lacks (`x` as `x...x`).
MIN_SHOWN_SECRET = 3
HIDDEN = "…"


def label(url: str) -> str:
    """The URL as notes and warnings show it: apprise's privacy form (passwords and tokens
    elided), without its options; a web hook's own query parameters are named, their values
    masked (`?token=****`: a hook's query often is its credential). A plain http(s) hook is
    shown with its own scheme (`http://...`), not as the json:// URL apprise posts it through,
    each segment of its path masked as a token (`/services/T0/B0/XYZ` -> `/s...s/T...0/...`):
    a hook's path often is its credential (Slack, Mattermost, a self-hosted ntfy's topic)."""
    import apprise
    from apprise.plugins.custom_form import NotifyForm
    from apprise.plugins.custom_json import NotifyJSON
    from apprise.plugins.custom_xml import NotifyXML

    target = resolve(url)
    plugin = apprise.Apprise.instantiate(target, suppress_exceptions=True)
    if plugin is None:
        return "(an unusable URL)"
    shown: str = plugin.url(privacy=True).split("?", 1)[0]
    if target != url:  # a plain web hook: its own http(s) scheme, not the json:// it is sent through
        shown = _path_masked(plugin, url.split(":", 1)[0].lower() + shown[shown.index("://"):])
    if isinstance(plugin, NotifyJSON | NotifyXML | NotifyForm) and plugin.params:
        shown += "?" + "&".join(f"{name}={QUERY_MASK}" for name in plugin.params)
    return _ntfy_shown(plugin, shown) if _topics(plugin) else shown


def rejected_label(url: str) -> str:
    """A URL apprise cannot use, as its problem names it (label() cannot: apprise made nothing
    of it): its scheme, an http(s) URL's host and port, every other part masked as a token."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _token(url)
    head, slash, path = rest.partition("/")
    path, mark, query = path.partition("?")
    user, at, host = head.rpartition("@")
    shown = host if scheme.lower() in ("http", "https") else _token(host)
    shown = (f"{user.split(':', 1)[0]}:{QUERY_MASK}@" if ":" in user else f"{_token(user)}@" if at else "") + shown
    path = "/".join(_token(part) for part in path.split("/"))
    query = "&".join(f"{pair.split('=', 1)[0]}={QUERY_MASK}" for pair in query.split("&") if pair)
    return f"{scheme}://{shown}{slash}{path}" + (f"?{query}" if mark else "")


def _token(text: str) -> str:
    """A token as apprise's privacy form shows one: its first and last character; a short one
    hidden whole (MIN_SHOWN_SECRET)."""
    if not text:
        return text
    return f"{text[0]}...{text[-1]}" if len(text) >= MIN_SHOWN_SECRET else HIDDEN


def _masked(plugin: Any, token: str) -> str:
    """A token of an URL apprise made a plugin of, as its privacy form shows it (`a...b`); a
    short one hidden whole (MIN_SHOWN_SECRET)."""
    return str(plugin.pprint(token, privacy=True, safe="")) if len(token) >= MIN_SHOWN_SECRET else HIDDEN


def _path_masked(plugin: Any, shown: str) -> str:
    """A plain hook's label with each segment of its path masked (scheme, host and port kept)."""
    start = shown.find("/", shown.index("://") + 3)
    if start < 0:
        return shown
    segments = shown[start:].split("/")
    return shown[:start] + "/".join(_masked(plugin, s) if s else s for s in segments)


def _topics(plugin: Any) -> list[str]:
    """An ntfy URL's topics: its secret (whoever knows a topic reads it and posts to it),
    which apprise's privacy form shows whole."""
    from apprise.plugins.ntfy import NotifyNtfy

    return [str(t) for t in plugin.topics] if isinstance(plugin, NotifyNtfy) else []


def _ntfy_shown(plugin: Any, shown: str) -> str:
    """An ntfy URL's label with each topic masked as apprise masks a token (`m...c`); a
    ntfy.sh URL, whose privacy form names no host (`ntfys://TOPIC`), names ntfy.sh."""
    from urllib.parse import urlsplit

    from apprise.plugins.ntfy import NtfyMode

    topics = "/".join(_masked(plugin, t) for t in _topics(plugin))
    if plugin.mode == NtfyMode.CLOUD:
        return f"{plugin.secure_protocol}://{urlsplit(plugin.cloud_notify_url).hostname}/{topics}"
    return shown[:shown.index("/", shown.index("://") + 3) + 1] + topics


def _unsaid(text: str, plugin: Any) -> str:
    """What apprise said of a delivery, its URL's secrets that its privacy form shows (an
    ntfy topic: `Failed to send ntfy notification to topic 'TOPIC'`) masked as label() masks them."""
    for topic in sorted(_topics(plugin), key=len, reverse=True):
        # only where it is named: 'TOPIC' or /TOPIC, never inside a word
        text = re.sub(rf"(?<=')({re.escape(topic)})(?=')|(?<=/)({re.escape(topic)})(?![\w-])", _masked(plugin, topic),
                      text)
    return text


@dataclass(frozen=True)
class Alert:
    title: str
    body: str
    failure: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def send(url: str, alert: Alert, attempts: int = ATTEMPTS, backoff: float = BACKOFF_S) -> str | None:
    """None when delivered; otherwise why the last attempt failed."""
    import apprise

    target = resolve(url)
    plugin = apprise.Apprise.instantiate(target, suppress_exceptions=True)
    if plugin is None:
        return check_url(url)
    kind = apprise.NotifyType.FAILURE if alert.failure else apprise.NotifyType.SUCCESS
    last = "not attempted"
    for attempt in range(attempts):
        with _apprise_log() as log:
            # Plain text: apprise escapes it where a service takes HTML (email's HTML part)
            delivered = plugin.notify(body=alert.body, title=alert.title, notify_type=kind,
                                      body_format=apprise.NotifyFormat.TEXT)
        if delivered:
            return None
        lines = log.lines(logging.WARNING)
        last = _connection_problem(plugin, target, log.lines(logging.DEBUG, only=True)) or \
            (_unsaid(lines[-1], plugin) if lines else "not delivered")
        if attempt + 1 < attempts:
            time.sleep(backoff * (2 ** attempt))
    return f"{last} (after {attempts} attempts)"


#: What apprise logs (at DEBUG) of the exception beneath "A Connection error occurred ...",
#: which it says alike of a hook that refused the connection and of one that never answered.
_SOCKET_ERROR = re.compile(r"^Socket Exception: (.*)$")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
#: The proxy urllib3 could not connect to, as its NewConnectionError names it.
_PROXY = re.compile(r"ProxyError\(.*?\(host='([^']+)', port=(\d+)\)")


def _connection_problem(plugin: Any, target: str, debug: list[str]) -> str | None:
    """What happened to the connection of a failed delivery, in words, from the exception
    apprise logged at DEBUG (requests' or smtplib's); None where it logged none. Only the OS's
    words are quoted: the exception's own text holds the URL, a hook's token in its query.
    The server is named only where the URL's host is one (a hook, an SMTP server); for
    most services it is a credential (Pushover's app token, Slack's first token), so
    those are named by their apprise scheme (`apprise service pover`)."""
    found = [m.group(1) for m in map(_SOCKET_ERROR.match, debug) if m]
    if not found:
        return None
    error = found[-1]
    if "ProxyError(" in error:  # urllib3 never reached the service: the proxy in between failed
        return _proxy_problem(error)
    where = _server_of(plugin)
    about, by, to = (f" (apprise service {target.split(':', 1)[0].lower()})", "", "") if where is None else \
        ("", f" by {where}", f" to {where}")
    who = "the hook" if _is_hook(plugin) else "the server"
    if "Read timed out" in error:  # urllib3's ReadTimeoutError: connected, then silence
        return f"{who} accepted the connection but sent no answer within {plugin.socket_read_timeout:g} s{about}"
    if "connect timeout=" in error:  # urllib3's ConnectTimeoutError
        return f"no connection{to} within {plugin.socket_connect_timeout:g} s{about}"
    if error.strip() == "timed out":  # smtplib's socket timeout, connecting or waiting for an answer
        return f"the connection{to} timed out{about}"
    errno = _ERRNO.search(error)
    if errno is None:
        return None
    if "Connection refused" in errno.group(1):
        return f"connection refused{by}{about}"
    return f"cannot deliver{to}: {errno.group(1).strip()}{about}"


def _is_hook(plugin: Any) -> bool:
    from apprise.plugins.custom_form import NotifyForm
    from apprise.plugins.custom_json import NotifyJSON
    from apprise.plugins.custom_xml import NotifyXML

    return isinstance(plugin, NotifyJSON | NotifyXML | NotifyForm)


def _server_of(plugin: Any) -> str | None:
    """HOST:PORT of a web hook's or an email's server (the URL's host is a host there); None
    for other services, where it may be a token."""
    from apprise.plugins.email import NotifyEmail

    if _is_hook(plugin):
        host = plugin.host
    elif isinstance(plugin, NotifyEmail):
        host = plugin.smtp_host
    else:
        return None
    return f"{host}:{plugin.port}" if plugin.port else str(host)


def _proxy_problem(error: str) -> str:
    """The proxy's failure (requests' ProxyError): the service was never reached."""
    proxy = _PROXY.search(error)
    named = f"the proxy {proxy.group(1)}:{proxy.group(2)}" if proxy else "the proxy"
    errno = _ERRNO.search(error)
    if errno is not None and "Connection refused" in errno.group(1):
        return f"connection refused by {named}"
    if errno is not None:
        return f"cannot reach {named}: {errno.group(1).strip()}"
    if "timed out" in error:
        return f"no connection to {named} in time"
    tunnel = re.search(r"Tunnel connection failed: (\d{3}[^'\")]*)", error)
    return f"{named} failed" + (f": it answered {tunnel.group(1).strip()}" if tunnel else "")


def should_notify(notify_on: str, code: int, previous_failed: bool | None) -> bool:
    """failure: every failed run; recovery: those and the first success after a failure;
    always: every run."""
    if notify_on == "always" or code != 0:
        return True
    return notify_on == "recovery" and bool(previous_failed)


#: How many of a failed task's message's further lines an alert quotes before its log's last lines.
MORE_LINES = 3
#: How many last lines of a failed task's output (stderr, else stdout) an alert quotes...
OUTPUT_LINES = 5
#: ... each cut to this many characters.
LINE_CHARS = 300


def _task_lines(task: dict[str, Any]) -> list[str]:
    """A failed task in an alert: its message's first line, the diagnosis, the log's last
    lines (verify's log tail; else the message's own: a launch that exited at once quotes
    `last lines of LOG:` after its first line), and up to MORE_LINES other lines of it."""
    first, *rest = (task.get("msg") or "").splitlines() or [task["status"]]
    lines = [f"- [{task['host']}] {task['task']}: {first}", *_output_lines(task)]
    if task.get("diagnosis"):
        lines.append(f"  diagnosis: {task['diagnosis']}")
    tail = (task.get("log_tail") or "").splitlines()
    if not tail:
        at = next((i for i, ln in enumerate(rest) if ln.startswith("last lines of ")), len(rest))
        lines += [f"  {ln}" for ln in rest[:at][:MORE_LINES]]
        tail = [ln.removeprefix("  | ").removeprefix("  ") for ln in rest[at + 1:]]
    tail = tail[-LOG_LINES:]
    return lines + (["  last log lines:", *(f"    {ln}" for ln in tail)] if tail else [])


def _output_lines(task: dict[str, Any]) -> list[str]:
    """The last lines of a failed task's stderr (of its stdout where stderr is empty): what a
    command said when it failed, which its message (`non-zero return code 1`) does not."""
    stream = "stderr" if (task.get("stderr_tail") or "").strip() else "stdout"
    text = [ln for ln in (task.get(f"{stream}_tail") or "").splitlines() if ln.strip()][-OUTPUT_LINES:]
    return [f"  {stream}:", *(f"    {ln[:LINE_CHARS]}" + (" ..." if len(ln) > LINE_CHARS else "") for ln in text)] \
        if text else []


def alert_for(summary: dict[str, Any]) -> Alert:
    """The alert of a run summary (runner.run_summary): what ran and how it ended, per failed
    host the task, its message, diagnosis and the log's last lines; for a run stopped part
    way or failed what it changed on each host (changes.py); the run id, the link."""
    state = "OK" if summary["exit_code"] == 0 else summary["result"].upper()
    if summary["exit_code"] == 0 and summary.get("previous_failed"):
        state = "RECOVERED"
    title = f"opsrunner: schedule {summary['schedule']} {state} (exit {summary['exit_code']}): {summary['playbook']}"
    lines = [f"{title} on {summary['controller']}"]
    if summary.get("error"):
        lines.append(summary["error"])
    for task in summary.get("failed_tasks", [])[:5]:
        lines += _task_lines(task)
    if summary.get("changes") is not None:  # interrupted, terminated, failed: what it left on the hosts
        lines += changes_lines(summary["changes"], summary.get("run_id"))
    if summary.get("run_id"):
        lines.append(f"run {summary['run_id']}: opsrunner show {summary['run_id']}")
    if summary.get("unrecorded"):  # what `show` and the dashboard lack of this run, and why
        lines.append(summary["unrecorded"])
    lines += _log_cut(summary)
    if summary.get("dashboard") and summary.get("run_id"):
        lines.append(f"dashboard: {summary['dashboard'].rstrip('/')}/runs/{summary['run_id']}")
    return Alert(title, "\n".join(lines), failure=summary["exit_code"] != 0)


def aborted_alert(summary: dict[str, Any], aborted: dict[str, Any]) -> Alert:
    """The alert of an earlier run of the schedule that ended aborted (its controller killed:
    SIGKILL, the OOM killer, a reboot) and so never sent its own; sent by the next run."""
    import datetime as dt

    def when(ts: float | None) -> str:
        return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "unknown"

    playbook = _as_scheduled(aborted.get("playbook"), summary)
    title = f"opsrunner: schedule {summary['schedule']} ABORTED (controller gone): {playbook}"
    lines = [f"{title} on {summary['controller']}",
             f"run {aborted['run_id']}, started {when(aborted['started'])}, ended without a result: its controller "
             f"was killed (SIGKILL, the OOM killer, a reboot); last sign of life {when(aborted.get('heartbeat'))}"]
    if aborted.get("task"):
        lines.append(f"it was in task: {aborted['task']}")
    if aborted.get("changes") is not None:  # what its history recorded of what it changed
        lines += changes_lines(aborted["changes"], aborted["run_id"], recorded_only=bool(aborted.get("unrecorded")))
    if aborted.get("unrecorded"):  # what it did last may not have reached the history
        lines.append(f"record incomplete: {aborted['unrecorded']}")
    noticed = summary.get("run_id") or "(not recorded)"
    lines.append(f"noticed by the next run {noticed} ({summary['result']}, exit {summary['exit_code']})")
    lines += _log_cut(summary, "the next run's")
    lines.append(f"opsrunner show {aborted['run_id']}")
    if summary.get("dashboard"):
        lines.append(f"dashboard: {summary['dashboard'].rstrip('/')}/runs/{aborted['run_id']}")
    return Alert(title, "\n".join(lines), failure=True)


def _log_cut(summary: dict[str, Any], whose: str = "its") -> list[str]:
    """The run's own output that could not be written (its log's disk full): told in the alert,
    which may be the only place that says it (the history on that disk too)."""
    return [f"{whose} log is cut: {note}" for note in summary.get("output_lost") or []]


def _as_scheduled(recorded: str | None, summary: dict[str, Any]) -> str:
    """An aborted run's playbook as every other alert names it: as the schedule gives it
    (relative to its project), not the absolute path its row records."""
    from pathlib import Path

    from opsrunner.project import resolve_playbook

    if not recorded:
        return str(summary["playbook"])
    project = Path(summary.get("project") or "/")
    if (project / resolve_playbook(summary["playbook"], project)).resolve() == Path(recorded).resolve():
        return str(summary["playbook"])
    return str(Path(recorded).relative_to(project)) if Path(recorded).is_relative_to(project) else recorded
