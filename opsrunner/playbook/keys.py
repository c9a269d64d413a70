"""The keywords a play, a block and a task may carry, and how they pass from one to the next."""

from __future__ import annotations

from typing import Any

from opsrunner.validation import load_schema
from opsrunner.yamlsource import PosDict, positioned

BLOCK_KEYS = frozenset({"block", "rescue", "always"})
TASK_KEYWORDS = frozenset(load_schema("playbook")["$defs"]["task"]["properties"]) - BLOCK_KEYS
#: Task keywords that are bare expressions (`{{ }}` optional), as `assert: that:` is.
CONDITION_KEYS = ("when", "until", "changed_when", "failed_when")
#: Keywords a block (or, where they exist, a play) passes down to its tasks, as in Ansible.
INHERITED = ("ignore_errors", "no_log", "become", "become_user", "become_method", "environment", "check_mode",
             "diff", "run_once", "delegate_to")
PLAY_DEFAULTS = ("become", "become_user", "become_method", "environment", "check_mode")
BLOCK_KEYWORDS = frozenset({"name", "when", "tags", "vars", *INHERITED}) | BLOCK_KEYS
INCLUDE_TASK_KEYS = ("import_tasks", "include_tasks")
INCLUDE_ROLE_KEYS = ("import_role", "include_role")
#: What an include item may carry besides the include itself (applied to every included task).
INCLUDE_KEYWORDS = frozenset({"name", "when", "tags", "vars", "become", "become_user", "become_method",
                              "environment", "ignore_errors", "check_mode", "diff", "run_once",
                              "delegate_to"})


def inherit(outer: dict[str, Any], raw: PosDict) -> dict[str, Any]:
    """A task's keywords with its enclosing blocks' applied: `when` conditions all apply,
    `vars` merge (inner wins), `ignore_errors` and `no_log` are the defaults."""
    own = {k: v for k, v in raw.items() if k in TASK_KEYWORDS}
    merged = {**{k: v for k, v in outer.items() if k in INHERITED}, **own}
    when = as_list(outer.get("when")) + as_list(own.get("when"))
    if when:
        merged["when"] = when
    if isinstance(outer.get("environment"), dict) and isinstance(own.get("environment"), dict):
        merged["environment"] = {**outer["environment"], **own["environment"]}  # as Ansible: both apply
    if outer.get("vars") or own.get("vars"):
        merged["vars"] = positioned(outer.get("vars"), own.get("vars"))
    return merged


def merged_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    return positioned(*layers)


def tags_of(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(t.strip() for t in value.split(",") if t.strip())
    return frozenset(str(v) for v in value)


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
