"""Failure alerts: a JSON POST (Slack-compatible `text` plus the structured run summary),
with a bounded timeout and retries. A failed alert is reported, never raised."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 10.0
ATTEMPTS = 3
BACKOFF_S = 1.0


def post_alert(url: str, payload: dict[str, Any], timeout: float = TIMEOUT_S, attempts: int = ATTEMPTS,
               backoff: float = BACKOFF_S) -> str | None:
    """None when delivered (HTTP 2xx); otherwise why the last attempt failed."""
    body = json.dumps(payload, default=str).encode("utf-8")
    last = "not attempted"
    for attempt in range(attempts):
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "User-Agent": "opsrunner-schedule"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if 200 <= response.status < 300:
                    return None
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(getattr(exc, "reason", exc))
        if attempt + 1 < attempts:
            time.sleep(backoff * (2 ** attempt))
    return f"{last} (after {attempts} attempts)"


def alert_text(summary: dict[str, Any]) -> str:
    """One Slack-friendly paragraph: what ran, the result, and the first failures."""
    head = (f"opsrunner: schedule {summary['schedule']} {summary['result'].upper()} "
            f"(exit {summary['exit_code']}) on {summary['controller']}: {summary['playbook']}")
    lines = [head]
    if summary.get("error"):
        lines.append(summary["error"])
    for task in summary.get("failed_tasks", [])[:5]:
        first = (task.get("msg") or "").splitlines()[:1]
        lines.append(f"- [{task['host']}] {task['task']}: {first[0] if first else task['status']}")
    if summary.get("run_id"):
        lines.append(f"details: opsrunner show {summary['run_id']}")
    return "\n".join(lines)
