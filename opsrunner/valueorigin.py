"""A bad value that came through a variable, told where the variable was set.

A task argument written `grace: "{{ kill_grace }}"` whose value no host accepts is a mistake
in the file that set `kill_grace` (the inventory, a group_vars/host_vars file, role defaults or
vars, the play's vars, -e), not in the role that uses it: the problem names that file:line and
the variable, and still the task where it is used. Positions come from the variable layers
(LazyVars.layer_of), each a mapping that knows where it set each key (yamlsource.positioned).
A value computed by a template (not a bare `{{ name }}`), a fact, a registered result or a
loop item has no such place: its problem stays at the task.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opsrunner.argcheck import TaskArgs
from opsrunner.errors import Problem, Quoted, SourcePos
from opsrunner.tasks import Task
from opsrunner.templating import LazyVars, is_template
from opsrunner.yamlsource import PosDict, PosList, key_position, pos_of

#: A template that is one variable and nothing else: `{{ kill_grace }}`.
_BARE = re.compile(r"\{\{-?\s*([A-Za-z_]\w*)\s*-?\}\}")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def bare_name(raw: Any) -> str | None:
    match = _BARE.fullmatch(raw.strip()) if isinstance(raw, str) else None
    return match.group(1) if match else None


@functools.lru_cache(maxsize=1024)
def _read_in(template: str) -> tuple[frozenset[str], frozenset[str]]:
    """The variables a template reads (jinja2's undeclared variables), and the keys it reads
    of them (`creds.token`, `creds['token']`): a template that does not parse reads none."""
    from jinja2 import meta, nodes

    from opsrunner.templating.environment import ENV

    try:
        tree = ENV.parse(template)
    except Exception:  # told by the template's own error
        return frozenset(), frozenset()
    keys = {n.attr for n in tree.find_all(nodes.Getattr)}
    keys |= {n.arg.value for n in tree.find_all(nodes.Getitem) if isinstance(n.arg, nodes.Const)
             and isinstance(n.arg.value, str)}
    return frozenset(meta.find_undeclared_variables(tree)), frozenset(keys)


def _templates(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw] if is_template(raw) else []
    if isinstance(raw, Mapping):
        return [t for v in raw.values() for t in _templates(v)]
    if isinstance(raw, list | tuple):
        return [t for v in raw for t in _templates(v)]
    return []


def names_read(raw: Any, variables: LazyVars | None = None) -> tuple[str, ...]:
    """Every variable a value written as `raw` is read through, and every key read of one:
    `{{ creds.token }}` -> creds, token; followed where a variable is itself a template
    (`g: "{{ api_token | upper }}"`). Where any is secret-named, a problem that quotes the
    value hides it (Masker.mask_problem): one rule for every problem that quotes a value."""
    found: list[str] = []
    todo = _templates(raw)
    while todo:
        names, keys = _read_in(todo.pop())
        for name in sorted(names | keys):
            if name in found:
                continue
            found.append(name)
            layer = variables.layer_of(name) if variables is not None and name in names else None
            todo += _templates(layer[name]) if layer is not None else []
    return tuple(found)


def quoted(raw: Any, value: Any, variables: LazyVars | None = None, within: Sequence[str | int] = ()) -> Quoted | None:
    """What a problem quotes of a value written as `raw` (a template) and rendered to `value`:
    the names it was read through (names_read, and the keys `within` it); None for a value
    written as it is (no variable's)."""
    names = names_read(raw, variables)
    return Quoted((*names, *(s for s in within if isinstance(s, str))), value) if names else None


@dataclass(frozen=True)
class Origin:
    """Where a variable's value that a task uses was written."""

    chain: list[str]  # the variables read, `a: "{{ b }}"` followed to b: the last one's value is used
    pos: SourcePos
    value: Any  # as written there (a PosDict or PosList keeps where each of its items is)


def where_set(variables: LazyVars, name: str) -> Origin | None:
    """Where the value `{{ name }}` renders to was written; None where that is not known (a
    value computed by a template, a variable no file sets: a fact, a registered result)."""
    chain: list[str] = []
    while name not in chain:
        chain.append(name)
        layer = variables.layer_of(name)
        if layer is None:
            return None
        raw = layer[name]
        following = bare_name(raw)
        if following is None:
            pos = key_position(layer, name)
            computed = isinstance(raw, str) and is_template(raw)
            return Origin(chain, pos, raw) if pos is not None and pos.file and not computed else None
        name = following
    return None  # refers to itself: told by the template's own error


def steps_of(path: str) -> list[str | int]:
    """A key path's steps: `verify.log` -> ["verify", "log"], `argv[0]` -> ["argv", 0]."""
    head = re.match(r"[^.\[]*", path)
    top = head.group(0) if head else path
    return [top, *(key if key is not None else int(index) for key, index in
                   (m.groups() for m in _STEP.finditer(path, len(top))))]


def _step(value: Any, step: str | int) -> tuple[bool, Any]:
    if isinstance(value, Mapping) and isinstance(step, str) and step in value:
        return True, value[step]
    if isinstance(value, list) and isinstance(step, int) and step < len(value):
        return True, value[step]
    return False, None


def told_where_set(problem: Problem, raw: Any, variables: LazyVars, within: Sequence[str | int] = ()) -> Problem:
    """`problem` (told where `raw` is written) told where the variable `raw` names was set,
    when `raw` is one variable and that place is known; else `problem` itself. `within`: the
    steps from that value to the bad one (`cache_paths[1]`), told at its item where known; an
    item that is itself one variable (`cache_paths: ["{{ rel }}"]`) followed to where that was set."""
    name = bare_name(raw)
    found = where_set(variables, name) if name is not None else None
    if found is None:
        return problem
    chain, pos, value, key = found.chain[:], found.pos, found.value, found.chain[-1]
    for step in within:
        ok, inner = _step(value, step)
        if not ok:
            break
        pos = pos_of(value, step, pos) if isinstance(value, (PosDict, PosList)) else pos
        value, key = inner, f"{key}[{step}]" if isinstance(step, int) else f"{key}.{step}"
        following = bare_name(value)
        further = where_set(variables, following) if following is not None else None
        if further is not None:  # `{{ cache_paths[0] }} -> {{ rel }}`, told where rel was set
            chain = [*chain[:-1], key, *further.chain]
            pos, value, key = further.pos, further.value, further.chain[-1]
    source = " -> ".join(f"{{{{ {n} }}}}" for n in chain)
    message = f"{problem.message.replace(f' (from {raw})', '')} (from {source})"
    # Both quote the value: a secret-named variable on the way hides it, however short.
    shown = Quoted((*chain, *names_read(raw, variables), *(s for s in within if isinstance(s, str))), value)
    return Problem(pos, f"{message}; used by {problem.key_path} at {problem.pos}", key,
                   used=dataclasses.replace(problem, quoted=shown), quoted=shown)


def args_told_where_set(task: Task, checked: TaskArgs, variables: LazyVars) -> TaskArgs:
    """A task's checked arguments with each problem told where its value was set, where that is
    known (`checked` itself, never changed, where none is: it may be a memo's)."""
    prefix = f"{task.module}."
    told = [_arg_told(task, _arg_quoted(task, p, checked, variables), variables) if p.key_path.startswith(prefix)
            else p for p in checked.problems]
    unchanged = all(a is b for a, b in zip(told, checked.problems, strict=True))
    return checked if unchanged else dataclasses.replace(checked, problems=told)


def _arg_quoted(task: Task, problem: Problem, checked: TaskArgs, variables: LazyVars) -> Problem:
    """The problem with the argument's value it quotes (as rendered, at its key path) and the
    variables its template reads (quoted()); itself where the argument is written as it is."""
    steps = steps_of(problem.key_path.removeprefix(f"{task.module}."))
    raw: Any = task.args
    value: Any = checked.args
    within: Sequence[str | int] | None = None  # the steps inside the template that gives the value
    for i, step in enumerate(steps):
        ok, value = _step(value, step)
        if within is None:
            raw_ok, raw = _step(raw, step)
            ok = ok and raw_ok
            within = steps[i + 1:] if isinstance(raw, str) and is_template(raw) else None
        if not ok:
            return problem
    shown = quoted(raw, value, variables, within or ())
    return problem if shown is None else dataclasses.replace(problem, quoted=shown)


def _arg_told(task: Task, problem: Problem, variables: LazyVars) -> Problem:
    """The argument's value walked down its key path to the first template that is one
    variable (`paths: "{{ cache_paths }}"` for `paths[1]`); the rest of the path is in it."""
    steps = steps_of(problem.key_path.removeprefix(f"{task.module}."))
    value: Any = task.args
    for i, step in enumerate(steps):
        ok, value = _step(value, step)
        if not ok:
            return problem
        if bare_name(value) is not None:
            return told_where_set(problem, value, variables, steps[i + 1:])
    return problem
