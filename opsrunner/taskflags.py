"""Task keywords that are flags (run_once, become, ...), as the engine reads them; modules
never see the keywords."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opsrunner.coercion import strict_boolean
from opsrunner.errors import Problem, Quoted, SourcePos, TemplateError
from opsrunner.playbook import Play, Task
from opsrunner.secrets import no_log_enabled
from opsrunner.templating import LazyVars, is_template, render, template_value
from opsrunner.valueorigin import quoted

#: The task keywords (on a task, block, include or as the play's default) that are booleans,
#: held to ansible-core's strict booleans as no_log is. The play's own any_errors_fatal,
#: force_handlers, gather_facts and become are YAML booleans by the schema already.
BOOLEAN_KEYWORDS = ("become", "check_mode", "diff", "run_once", "ignore_errors")


class NotBoolean(TemplateError):
    """A boolean keyword that rendered to none of ansible-core's booleans."""


def flag(task: Task, key: str, variables: LazyVars, default: bool) -> bool:
    """A boolean task keyword (possibly templated); `default` when the task does not set it or
    it renders to null. A value that is none of ansible-core's booleans raises NotBoolean
    naming the key and the value: the task fails on it, nothing of it is run."""
    value = task.kw(key)
    if value is None:
        return default
    if value is True or value is False:
        return value
    try:
        checked = _strict(key, value, template_value(value, variables))
    except ValueError as exc:
        raise NotBoolean(str(exc), keyword_at(task, key)) from None
    return default if checked is None else checked


def check_flags(task: Task, variables: LazyVars, keys: tuple[str, ...]) -> None:
    """Each of `keys` (read after the task runs, or not on every host) read now as flag() reads
    it: one that is no boolean raises NotBoolean before the task runs. One that does not render
    (a loop's item) is left to where it is read, as before."""
    for key in keys:
        value = task.kw(key)
        if value is not None and not isinstance(value, bool):
            try:
                flag(task, key, variables, False)
            except NotBoolean:
                raise
            except TemplateError:
                pass


def _strict(key: str, value: Any, rendered: Any) -> bool | None:
    """`rendered` (`key`'s value, written as `value`) as ansible-core's strict boolean; None for null."""
    if rendered is None:
        return None
    try:
        return strict_boolean(rendered)
    except ValueError as exc:
        raise ValueError(keyword_problem(key, value, str(exc))) from None


def flag_raw(task: Task, key: str) -> bool:
    """A boolean task keyword as written, without templating it."""
    value = task.kw(key)
    return bool(value) and str(value).lower() not in ("false", "no", "0")


def run_once(task: Task, variables: LazyVars) -> bool:
    return flag(task, "run_once", variables, False)


def task_no_log(play: Play, task: Task, variables: LazyVars | None) -> bool:
    """`no_log` of a task (the play's when the task sets none); hidden when in doubt: a
    template that cannot be rendered, a value that is no boolean (the task fails on it:
    no_log_refusal), or no variables to render it with."""
    value = task.kw("no_log", play.no_log)
    if variables is None and isinstance(value, str):
        return True
    try:
        return no_log_enabled(value, None if variables is None else lambda v: render(v, variables))
    except (TemplateError, ValueError):
        return True


def no_log_refusal(play: Play, task: Task, render_with: Callable[[Any], Any]) -> str | None:
    """Why the task's `no_log`, rendered by `render_with`, is no boolean (ansible-core fails on
    it), naming the key and the value as written; None when it is one. What `render_with`
    raises (a TemplateError, preflight's Deferred) is the caller's to judge."""
    return keyword_refusal("no_log", task.kw("no_log", play.no_log), render_with)


def keyword_refusal(key: str, value: Any, render_with: Callable[[Any], Any]) -> str | None:
    """Why boolean keyword `key`, written as `value` and rendered by `render_with`, is none of
    ansible-core's booleans; None when it is one (or null)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        _strict(key, value, render_with(value) if isinstance(value, str) else value)
    except ValueError as exc:
        return str(exc)
    return None


def boolean_keyword_problems(play: Play, task: Task, render_with: Callable[[Any], Any],
                             unknown: type[Exception], variables: LazyVars | None = None) -> list[Problem]:
    """The task's boolean keywords (no_log too) that are known now and are no booleans, or do
    not render: the run would fail the task on each. One whose rendering raises `unknown`
    (known on the host only) is left to the run. `variables`: those it renders with, where
    a value read through a variable is followed to those it reads (`g: "{{ api_token }}"`)."""
    problems = []
    for key in ("no_log", *BOOLEAN_KEYWORDS):
        value = task.kw(key, play.no_log if key == "no_log" else None)
        if value is None or isinstance(value, bool):
            continue  # the common case: nothing to render
        try:
            why = keyword_refusal(key, value, render_with)
        except unknown:
            continue
        except TemplateError as exc:
            why = keyword_problem(key, value, exc.bare_message)
        if why:
            problems.append(Problem(no_log_at(play, task) if key == "no_log" else keyword_at(task, key), why, key,
                                    quoted=_quoted(value, render_with, variables)))
    return problems


def _quoted(value: Any, render_with: Callable[[Any], Any], variables: LazyVars | None) -> Quoted | None:
    """The variables a keyword written as a template reads, followed (`{{ g }}` to api_token),
    and the value its problem quotes (hidden by Masker.mask_problem where one is a secret's)."""
    try:
        return quoted(value, render_with(value), variables)
    except Exception:  # one that does not render quotes no value
        return None


def keyword_problem(key: str, value: Any, why: str) -> str:
    return f"{key} {value!r}: {why}" if is_template(value) else f"{key}: {why}"


def keyword_at(task: Task, key: str) -> SourcePos:
    """Where the task's keyword `key` is written: the task's, the play's when it is the play's
    default, else (inherited from a block or an include) the task itself."""
    return task.key_pos.get(key) or task.play_key_pos.get(key) or task.pos


def no_log_at(play: Play, task: Task) -> SourcePos:
    """Where the task's `no_log` is written: the task's (or, inherited from a block, the task
    itself), else the play's."""
    if task.kw("no_log") is not None:
        return task.at("no_log")
    return play.no_log_pos or play.pos
