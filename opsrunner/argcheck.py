"""A task's arguments checked: converted to their declared types (coercion.py), validated
against the module's schema and its own sanity rules, and one-file paths that are folders
refused (localfiles.py). Preflight checks every task for every host before the run, and the
run checks again what renders differently by then; both through one memo (Memo).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from opsrunner.coercion import coerce_args
from opsrunner.errors import Problem, SourcePos
from opsrunner.localfiles import directory_problems
from opsrunner.modules.registry import get_module, module_info
from opsrunner.secrets import mask_by_keys
from opsrunner.tasks import Task
from opsrunner.templating import is_template
from opsrunner.validation import schema_problems


@dataclass
class TaskArgs:
    """A task's arguments rendered and converted for one host, and the problems found."""

    args: dict[str, Any]
    problems: list[Problem] = field(default_factory=list)
    deferred: bool = False  # some arguments could not be rendered yet



def arg_pos(task: Task, arg: str) -> SourcePos:
    top = re.split(r"[.\[]", arg, maxsplit=1)[0]
    at = getattr(task.args, "at", None)
    return at(top) if callable(at) else task.pos


def origin(task: Task, arg: str) -> str:
    """Where a bad value came from, when it came through a template: the template's text."""
    raw = task.args.get(re.split(r"[.\[]", arg, maxsplit=1)[0])
    return f" (from {raw})" if isinstance(raw, str) and is_template(raw) else ""


@lru_cache(maxsize=64)
def _partial_schema(module: str) -> dict[str, Any]:
    """A module's schema without the rules on which arguments must be present."""
    return {k: v for k, v in module_info(module).schema.items() if k not in ("required", "anyOf", "oneOf", "allOf")}


def check_args(task: Task, rendered: Mapping[str, Any], partial: bool = False) -> TaskArgs:
    """Convert rendered arguments to their types, then validate them (schema, module sanity).

    `partial`: some arguments are missing because they are deferred, so the rules about
    which arguments must be present are left to run time."""
    if not partial and task.args_checked and rendered == task.args:
        args, problems = dict(rendered), []  # converted and validated at load, rendered as they were
    else:
        args, refusals = coerce_args(rendered, module_info(task.module).schema)
        if refusals:
            return TaskArgs(args, mask_by_keys([Problem(arg_pos(task, r.arg), r.message(task.module)
                                                        + origin(task, r.arg), f"{task.module}.{r.arg}")
                                                for r in refusals], rendered))
        problems = _schema_problems(task, args, partial)
    if not problems:  # the arguments there are, also where others are deferred
        problems += value_problems(task, args)
    if not problems and not partial:
        problems += [Problem(getattr(task.args, "pos", task.pos), msg, task.module)
                     for msg in get_module(task.module).sanity(args)]
    return TaskArgs(args, mask_by_keys(problems or directory_problems(task, args), rendered))


def _schema_problems(task: Task, args: Mapping[str, Any], partial: bool) -> list[Problem]:
    schema = _partial_schema(task.module) if partial else module_info(task.module).schema
    return [Problem(arg_pos(task, p.key_path) if p.key_path else task.pos, p.message,
                    f"{task.module}.{p.key_path}" if p.key_path else task.module)
            for p in schema_problems(args, schema, str(task.pos.file))]


#: (the argument's key path, what is wrong with its value) for each bad value found.
Findings = list[tuple[str, str]]


def value_problems(task: Task, args: Mapping[str, Any]) -> list[Problem]:
    """Values the target would refuse whatever it holds, told at their key before any host is
    touched: a restart must not stop the job and only then find its launch or clear unusable."""
    rule = _VALUE_RULES.get(task.module)
    return [Problem(arg_pos(task, key), message + origin(task, key), f"{task.module}.{key}")
            for key, message in (rule(args) if rule else [])]


def _launch_program(args: Mapping[str, Any]) -> Findings:
    """launch_detached's program: a blank command runs `sh -c ' '`, which exits 0 at once
    (reported as launched), and a blank argv[0] is refused only on the target."""
    argv = args.get("argv")
    if isinstance(argv, list) and argv and not str(argv[0]).strip():
        return [("argv[0]", f"the program {str(argv[0])!r} is blank: there is no program to run")]
    command = args.get("command")
    if isinstance(command, str) and command and not command.strip():
        return [("command", f"{command!r} is blank: there is no program to run")]
    return []


def _clear_cache_paths(args: Mapping[str, Any]) -> Findings:
    from opsrunner.modules.clear_cache import refused_anywhere  # the module's code: loaded when used

    return refused_anywhere(args)


_VALUE_RULES: dict[str, Callable[[Mapping[str, Any]], Findings]] = {
    "launch_detached": _launch_program, "clear_cache": _clear_cache_paths}


#: Checks already made in one preflight: (task, rendered arguments) -> problems. Hosts usually
#: render a task to the same arguments, and the schema check is the expensive part.
#: The run keeps them (PlayRun.checked_args) and checks a task's arguments at run time through
#: it too: where they render as preflight rendered them, that check is made already. The task
#: is kept with its check: a task of a dynamic include may reuse the id of a freed one.
Memo = dict[tuple[int, bool, str], tuple[Task, TaskArgs]]
#: Checks a memo keeps (then it starts again: a long loop's items each render differently).
MEMO_MAX = 4096


def memo_check(task: Task, rendered: dict[str, Any], partial: bool, memo: Memo | None) -> TaskArgs:
    """check_args, once per distinct rendering of a task's arguments where there is a memo."""
    if memo is None:
        return check_args(task, rendered, partial)
    key = (id(task), partial, repr(rendered))
    found = memo.get(key)
    if found is None or found[0] is not task:
        if len(memo) >= MEMO_MAX:
            memo.clear()
        checked = check_args(task, rendered, partial)
        checked.deferred = partial
        found = memo[key] = (task, checked)
    return found[1]
