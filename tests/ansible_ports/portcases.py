"""Cases ported from ansible-core's integration targets, and how one is run and judged.

A case is one YAML document in cases/*.yml: `name`, `source` (the ansible-core target it was
ported from), `area`, `playbook` (text), optional `inventory` (text; default: h1 and h2 over the
local connection), `args` (extra command-line arguments, as ansible-playbook takes them) and
`files` (name -> text, written next to the playbook). `@TMP@` anywhere stands for the case's
own temporary directory, so every file a case touches lies inside it.

The outcome compared is an `Outcome`: the exit code, the recap counters per host (hosts whose
counters are all zero are left out: ansible-core lists only hosts it processed) and, per host
in order, what each successful `debug` printed ({"msg": value} or {var: value}; scalars are
compared as text, since ansible-core keeps a template's native type where opsrunner renders
text, and paths under the case's temp dir are written @TMP@).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CASES_DIR = HERE / "cases"
EXPECTED = HERE / "expected.json"
DEFAULT_INVENTORY = """\
all:
  hosts:
    h1: {ansible_connection: local}
    h2: {ansible_connection: local}
"""

#: Where opsrunner deliberately differs from ansible-core: case name -> why (docs/ansible-differences.md).
_PREFLIGHT = ("opsrunner refuses the playbook before any host is touched (exit 4, nothing run) where "
              "ansible-core fails the task at run time (exit 2)")
_STATIC_INCLUDES = ("opsrunner reads included task files when it loads the playbook, so each is checked "
                    "before the run: a templated or looped include_tasks, or a missing file, is refused (exit 4)")
DELIBERATE: dict[str, str] = {
    "when_true_string_from_extra_var": f"a string conditional from -e: {_PREFLIGHT}",
    "when_false_string_from_extra_var": f"a string conditional from -e: {_PREFLIGHT}",
    "when_yes_string_is_an_error": f"a string conditional from -e: {_PREFLIGHT}",
    "when_undefined_variable_fails": f"an undefined variable in `when`: {_PREFLIGHT}",
    "debug_msg_undefined_fails": f"an undefined variable in a task argument: {_PREFLIGHT}",
    "until_without_register": f"a boolean `until`: {_PREFLIGHT}",
    "handler_unknown_name": "a notify naming no handler is refused before the run (exit 4); ansible-core "
                            "stops the run when the task notifies it (exit 1)",
    "unreachable_host_others_continue": "an unreachable host exits 3 (ansible-core: 4, the code it also "
                                        "gives a playbook that does not parse; opsrunner's 4 means nothing ran)",
    "include_tasks_loop": _STATIC_INCLUDES,
    "include_tasks_templated_name": _STATIC_INCLUDES,
    "include_tasks_missing_file": _STATIC_INCLUDES,
    "template_file_syntax_error": f"a syntax error in a template file: {_PREFLIGHT}",
    "include_vars_missing_file": f"an include_vars file that does not exist: {_PREFLIGHT}",
    "hosts_pattern_no_match": "a play whose hosts pattern matches no host is refused (exit 1, nothing run), "
                              "against a typo silently running nothing; ansible-core skips the play (exit 0)",
}

#: Cases that still differ and are not meant to: case name -> what differs.
NOT_YET: dict[str, str] = {
}


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    area: str
    playbook: str
    inventory: str = DEFAULT_INVENTORY
    args: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    rc: int
    recap: dict[str, dict[str, int]]
    debug: dict[str, list[str]]

    def as_dict(self) -> dict[str, Any]:
        return {"rc": self.rc, "recap": self.recap, "debug": self.debug}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(int(data["rc"]), dict(data["recap"]), dict(data["debug"]))


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(CASES_DIR.glob("*.yml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                cases.append(Case(name=doc["name"], source=doc["source"], area=doc["area"],
                                  playbook=doc["playbook"], inventory=doc.get("inventory", DEFAULT_INVENTORY),
                                  args=tuple(str(a) for a in doc.get("args", ())), files=doc.get("files", {})))
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"case names repeat: {sorted(dupes)}"
    return cases


def write_case(case: Case, tmp: Path) -> tuple[Path, Path, list[str]]:
    def sub(text: str) -> str:
        return text.replace("@TMP@", str(tmp))

    tmp.mkdir(parents=True, exist_ok=True)
    for name, text in case.files.items():
        target = tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(sub(text))
    playbook, inventory = tmp / "pb.yml", tmp / "inv.yml"
    playbook.write_text(sub(case.playbook))
    inventory.write_text(sub(case.inventory))
    return playbook, inventory, [sub(a) for a in case.args]


def _text(value: Any, tmp: Path) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if isinstance(value, dict | list) else str(value)
    return text.replace(str(tmp), "@TMP@")


def _recap(recap: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {h: dict(c) for h, c in sorted(recap.items()) if any(c.values())}


def _debug_text(value: dict[str, Any], tmp: Path) -> str:
    ((key, val),) = value.items() if len(value) == 1 else ((json.dumps(sorted(value)), value),)
    return f"{key}={_text(val, tmp)}"


def run_opsrunner(case: Case, tmp: Path, timeout: float = 120) -> Outcome:
    playbook, inventory, args = write_case(case, tmp)
    events = tmp / "events.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPSRUNNER_HISTORY=str(tmp / "history.db"))
    argv = [sys.executable, "-m", "opsrunner", "play", str(playbook), "-i", str(inventory), "--no-history",
            "--no-color", "--json-events", str(events), *args]
    proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    recap: dict[str, dict[str, int]] = {}
    debug: dict[str, list[str]] = {}
    lines = events.read_text().splitlines() if events.exists() else []
    for line in lines:
        e = json.loads(line)
        if e["event"] == "recap":
            recap = e["hosts"]
        elif e["event"] in ("task_end", "handler_end") and e["module"] == "debug":
            for value in _opsrunner_debug(e):
                debug.setdefault(e["host"], []).append(_debug_text(value, tmp))
    return Outcome(proc.returncode, _recap(recap), debug)


def _opsrunner_debug(event: dict[str, Any]) -> list[dict[str, Any]]:
    def value(data: dict[str, Any]) -> dict[str, Any]:
        return {"msg": data["msg_value"]} if "msg_value" in data else dict(data)

    if event.get("items"):
        return [value(i["data"]) for i in event["items"] if i["status"] in ("ok", "changed")]
    return [value(event["data"])] if event["status"] in ("ok", "changed") else []


def run_ansible(case: Case, tmp: Path, bindir: Path, timeout: float = 120) -> Outcome:
    playbook, inventory, args = write_case(case, tmp)
    record = tmp / "ansible_record.jsonl"
    env = dict(os.environ, ANSIBLE_CALLBACK_PLUGINS=str(HERE / "ansible_callback"),
               ANSIBLE_CALLBACKS_ENABLED="parity_record", PARITY_RECORD=str(record),
               ANSIBLE_PYTHON_INTERPRETER=str(bindir / "python"), ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_HOME=str(tmp / ".ansible"), ANSIBLE_LOCAL_TEMP=str(tmp / ".ansible" / "tmp"),
               ANSIBLE_REMOTE_TEMP=str(tmp / ".ansible" / "remote"), ANSIBLE_RETRY_FILES_ENABLED="false",
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="false")
    argv = [str(bindir / "ansible-playbook"), str(playbook), "-i", str(inventory), *args]
    proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    recap: dict[str, dict[str, int]] = {}
    debug: dict[str, list[str]] = {}
    lines = record.read_text().splitlines() if record.exists() else []
    for line in lines:
        r = json.loads(line)
        if "recap" in r:
            recap = r["recap"]
        else:
            debug.setdefault(r["host"], []).append(_debug_text(r["debug"], tmp))
    return Outcome(proc.returncode, _recap(recap), debug)


def load_expected() -> dict[str, Outcome]:
    if not EXPECTED.exists():
        return {}
    return {name: Outcome.from_dict(o) for name, o in json.loads(EXPECTED.read_text()).items()}


def save_expected(outcomes: dict[str, Outcome]) -> None:
    data = {name: o.as_dict() for name, o in sorted(outcomes.items())}
    EXPECTED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
