"""An ansible-core callback for side_by_side.py: writes, as JSON Lines to $PARITY_RECORD, what
each successful `debug` printed (per host, per loop item) and the recap counters. Loaded only
by ansible-playbook (ANSIBLE_CALLBACK_PLUGINS), never imported by opsrunner or its tests."""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: parity_record
type: aggregate
short_description: record debug output and recap for opsrunner's side-by-side parity script
"""


_NOT_SHOWN = ("changed", "failed", "item", "ansible_loop_var", "warnings", "deprecations")


def _debug_value(result: dict[str, Any]) -> Any:
    if "msg" in result:
        return {"msg": result["msg"]}
    keys = [k for k in result if not k.startswith("_") and k not in _NOT_SHOWN]
    return {k: result[k] for k in keys}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "parity_record"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._out = open(os.environ["PARITY_RECORD"], "a", encoding="utf-8")  # noqa: SIM115

    def _write(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps(record, default=str, sort_keys=True) + "\n")
        self._out.flush()

    def v2_runner_on_ok(self, result: Any) -> None:
        if result._task.action not in ("debug", "ansible.builtin.debug"):
            return
        data = result._result
        host = result._host.get_name()
        if "results" in data:
            for item in data["results"]:
                if not item.get("skipped") and not item.get("failed"):
                    self._write({"host": host, "debug": _debug_value(item)})
        else:
            self._write({"host": host, "debug": _debug_value(data)})

    def v2_playbook_on_stats(self, stats: Any) -> None:
        recap = {}
        for host in sorted(stats.processed):
            s = stats.summarize(host)
            recap[host] = {"ok": s["ok"], "changed": s["changed"], "unreachable": s["unreachable"],
                           "failed": s["failures"], "skipped": s["skipped"], "rescued": s["rescued"],
                           "ignored": s["ignored"]}
        self._write({"recap": recap})
