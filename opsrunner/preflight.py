"""Preflight: render and validate every task for each host before the first change.

A restart must not stop halfway on a mistake that was visible before it began (an
undefined variable, `kill_grace: thirty`, `verify: {}`). Before any task runs, each task
of each play is rendered for each of its hosts from what is known then (inventory,
play/role/task vars, -e, magic vars); its arguments are converted to their declared
types (coercion.py), checked against the module's schema and the module's own sanity
rules. What depends on registered results or loop items is left to run time.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jinja2.meta

from opsrunner.argcheck import Memo, TaskArgs, arg_pos, memo_check, origin
from opsrunner.coercion import coerce_args, show_value
from opsrunner.deadline_fit import grace_problems
from opsrunner.deadlines import COMMAND_MODULES, DEFAULT_TIMEOUT_VAR, module_default, seconds
from opsrunner.errors import ModuleFailure, Problem, Quoted, SourcePos, TemplateError, ValidationError
from opsrunner.hostvars import VariableManager, connection_spec
from opsrunner.includes import read_vars_file, vars_file_problems
from opsrunner.inventory import Inventory, PatternError
from opsrunner.keywordchecks import delegate_problems, environment_problems, lease_problems, read_as_template
from opsrunner.localfiles import host_is_local, may_make_files_here, missing_problems
from opsrunner.modules import template as template_file
from opsrunner.playbook import Play, Playbook
from opsrunner.secrets import Masker
from opsrunner.selection import serial_problem, tags_problems
from opsrunner.taskflags import boolean_keyword_problems, task_no_log
from opsrunner.tasks import Task, iter_tasks
from opsrunner.templating import ENV, OMIT, LazyVars, check_syntax, is_template, template_value, truthy
from opsrunner.valueorigin import args_told_where_set, quoted, told_where_set

_UNDEFINED_RE = re.compile(r"'(\w+)' is undefined")
#: Task keywords that must be numbers once rendered.
_NUMERIC_KEYWORDS = ("timeout", "retries", "delay")


class Deferred(Exception):
    """A value that depends on what only exists at run time (registered results, loop items)."""


def _names(source: str) -> frozenset[str]:
    try:
        return _undeclared(source)
    except jinja2.TemplateSyntaxError:
        return frozenset()


@lru_cache(maxsize=4096)
def _undeclared(source: str) -> frozenset[str]:
    return frozenset(jinja2.meta.find_undeclared_variables(ENV.parse(source)))


def referenced(value: Any) -> frozenset[str]:
    """Variable names a (nested) value's templates read directly."""
    if isinstance(value, str):
        return _names(value) if is_template(value) else frozenset()
    if isinstance(value, Mapping):
        return frozenset().union(*(referenced(v) for v in value.values())) if value else frozenset()
    if isinstance(value, list):
        return frozenset().union(*(referenced(v) for v in value)) if value else frozenset()
    return frozenset()


def render(value: Any, variables: LazyVars, deferred: frozenset[str]) -> Any:
    """Template a value; raise Deferred when it needs something that only exists at run time."""
    if referenced(value) & deferred:
        raise Deferred
    try:
        return template_value(value, variables)
    except TemplateError as exc:
        if _runtime_undefined(exc, deferred):
            raise Deferred from None  # reached through another variable
        raise


def _runtime_undefined(exc: TemplateError, deferred: frozenset[str]) -> bool:
    """The error is an undefined name that gets a value during the run (a registered result,
    a loop item, a fact: facts are gathered on the host, so `ansible_*` are not known yet)."""
    match = _UNDEFINED_RE.search(exc.bare_message)
    return match is not None and (match.group(1) in deferred or match.group(1).startswith("ansible_"))


def render_args(task: Task, variables: LazyVars, deferred: frozenset[str] = frozenset(),
                memo: Memo | None = None) -> TaskArgs:
    """Render each argument (deferred ones are left out), then convert and validate them."""
    rendered: dict[str, Any] = {}
    problems: list[Problem] = []
    partial = False
    for key, raw in task.args.items():
        try:
            value = render(raw, variables, deferred)
        except Deferred:
            partial = True
            continue
        except TemplateError as exc:
            problems.append(Problem(arg_pos(task, key), f"{exc.bare_message}{origin(task, key)}",
                                    f"{task.module}.{key}"))
            continue
        if value != OMIT:
            rendered[key] = value
    if problems:
        return TaskArgs(rendered, problems, partial)
    # The memo's check is shared by hosts: where a bad value was set is told for this one.
    return args_told_where_set(task, memo_check(task, rendered, partial, memo), variables)


def _template_file_problems(task: Task, args: dict[str, Any], variables: LazyVars,
                            deferred: frozenset[str]) -> list[Problem]:
    """A template file rendered as the run will render it: a variable it reads that no host var
    defines (nor the run will) is bad input, at the template's line, like one in an argument."""
    try:
        template_file.rendered(task, args, variables)
    except ModuleFailure:
        return []  # no such file: told at load, or its name is only known at run time
    except TemplateError as exc:
        if _runtime_undefined(exc, deferred):
            return []
        line = exc.in_file if exc.in_file is not None and exc.in_file.line else None  # else the file alone
        pos = SourcePos(line.file, line.line, 1) if line else arg_pos(task, "src")
        message = exc.detail if line else exc.bare_message
        return [Problem(pos, f"{message} (in the template src at {arg_pos(task, 'src')})", "template.src")]
    return []


def _vars_file_problems(task: Task, args: dict[str, Any]) -> list[Problem]:
    """include_vars of a templated file name, rendered from what is known before the run: the
    file it names must exist and hold variables (an untemplated name was read at load)."""
    raw = task.args.get("file")
    if not isinstance(raw, str) or not is_template(raw) or not isinstance(args.get("file"), str):
        return []
    return vars_file_problems(args["file"], task.search_dirs("vars"), arg_pos(task, "file"), "include_vars.file")


def _keyword_problems(task: Task, variables: LazyVars, deferred: frozenset[str],
                      play: Play | None = None) -> list[Problem]:
    """The numeric keywords rendered for one host, and the deadline the task will run under
    checked as the run checks it (executor.py): a problem here is one the run would meet."""
    problems = []
    for key in _NUMERIC_KEYWORDS:
        raw = task.kw(key, play.timeout if key == "timeout" and play else None)
        if raw is None:
            problems += _default_deadline_problems(task, variables, deferred) if key == "timeout" else []
            continue
        # The play's `timeout` line where the task takes the play's as its own.
        at = task.at(key) if task.kw(key) is not None or play is None else play.timeout_pos or task.pos
        try:
            value = render(raw, variables, deferred)
        except Deferred:
            continue
        except TemplateError as exc:
            problems.append(Problem(at, exc.bare_message, key))
            continue
        if coerce_args({key: value}, {"properties": {key: {"type": "number"}}})[1]:
            bad = [Problem(at, f"{key} must be a number, not {show_value(value)}", key)]
        elif key == "timeout":
            bad = _deadline_problems(task, value, key, "", at)
            problems += [] if bad else _grace_problems(task, value, variables, deferred)
        else:
            bad = []
        if bad:  # where a secret-named variable gives it: hidden (names_read parses the template: only now)
            shown = quoted(raw, value, variables)
            bad = [dataclasses.replace(p, quoted=shown) for p in bad]
        problems += [told_where_set(p, raw, variables) for p in bad]  # where `{{ stop_timeout }}` was set
    rendered = functools.partial(render, variables=variables, deferred=deferred)
    return (problems + delegate_problems(task, variables, rendered, Deferred)
            + lease_problems(task, variables, rendered, Deferred))


def _boolean_problems(play: Play, task: Task, variables: LazyVars, deferred: frozenset[str]) -> list[Problem]:
    """Boolean keywords (no_log, become, check_mode, ...) known now that are no booleans: the
    run would fail the task on each; one known on the host only fails the task there."""
    return boolean_keyword_problems(play, task, lambda value: render(value, variables, deferred), Deferred, variables)


def _grace_problems(task: Task, timeout: Any, variables: LazyVars, deferred: frozenset[str]) -> list[Problem]:
    """kill_old's grace against its deadline (deadline_fit.py), when the grace is known now."""
    if task.module != "kill_old":
        return []
    try:
        grace = render(task.args.get("grace"), variables, deferred)
    except (Deferred, TemplateError):
        return []  # known at run time only, or a problem the argument check tells
    problems = grace_problems(task, seconds(timeout), grace)
    shown = quoted(task.args.get("grace"), grace, variables) if problems else None
    return [dataclasses.replace(p, quoted=shown) for p in problems]


def _default_deadline_problems(task: Task, variables: LazyVars, deferred: frozenset[str]) -> list[Problem]:
    """A shell/command task that sets no timeout runs under the `default_timeout` variable."""
    raw = module_default(task.module, {}, variables) if task.module in COMMAND_MODULES else None
    if raw is None:
        return []
    where = f"variable {DEFAULT_TIMEOUT_VAR} (the deadline of a {task.module} task that sets no timeout): "
    try:
        value = render(raw, variables, deferred)
    except Deferred:
        return []
    except TemplateError as exc:
        return [Problem(task.pos, where + exc.bare_message, DEFAULT_TIMEOUT_VAR)]
    bad = _deadline_problems(task, value, DEFAULT_TIMEOUT_VAR, where)
    shown = quoted(read_as_template(DEFAULT_TIMEOUT_VAR), value, variables) if bad else None
    return [dataclasses.replace(p, quoted=shown) for p in bad]


def _deadline_problems(task: Task, value: Any, key: str, where: str, at: SourcePos | None = None,
                       shown: Quoted | None = None) -> list[Problem]:
    try:
        seconds(value)
    except ValueError as exc:
        return [Problem(at or task.at(key), where + str(exc), key, quoted=shown)]
    return []


def keyword_number(task: Task, key: str, variables: Mapping[str, Any]) -> float:
    """A numeric task keyword (timeout, retries, delay) rendered and converted at run time."""
    value = template_value(task.kw(key), variables)
    converted, refusals = coerce_args({key: value}, {"properties": {key: {"type": "number"}}})
    if refusals:
        raise TemplateError(f"{key} must be a number, not {show_value(value)}", task.at(key), key)
    return float(converted[key])


def _will_run(task: Task, variables: LazyVars, deferred: frozenset[str]) -> bool:
    """False when the task's `when` is known to be false on this host; True when true or unknown."""
    when = task.kw("when")
    for expr in when if isinstance(when, list) else [when]:
        if expr is None or isinstance(expr, bool):
            if expr is False:
                return False
            continue
        text = str(expr).strip().removeprefix("{{").removesuffix("}}")
        if _names("{{ (" + text + ") }}") & deferred:
            continue
        try:
            if not truthy(expr, variables):
                return False
        except TemplateError as exc:
            if not _runtime_undefined(exc, deferred):
                raise
    return True


def check_task(task: Task, variables: LazyVars, deferred: frozenset[str], memo: Memo | None = None,
               play: Play | None = None, sources_exist: bool = False) -> list[Problem]:
    """Every problem of one task for one host that can be seen before the run (`play`: the
    task's, whose `timeout` and `no_log` hold for its tasks that set none; `sources_exist`:
    the controller paths it reads must exist now, as nothing earlier in the run can make them)."""
    control = task.kw("loop_control")
    control = control if isinstance(control, Mapping) else {}
    loop_var, index_var = str(control.get("loop_var", "item")), control.get("index_var")
    looped = task.kw("loop") is not None or task.kw("with_items") is not None
    # `when` is evaluated per loop item (ansible-core): the loop's variables are not known here.
    loop_names = frozenset({loop_var, "ansible_loop", "ansible_loop_var", *([str(index_var)] if index_var else [])})
    try:
        if not _will_run(task, variables, deferred | loop_names if looped else deferred):
            return []
    except TemplateError as exc:
        return [Problem(task.at("when"), exc.bare_message, "when")]
    problems = _keyword_problems(task, variables, deferred, play)
    # One that reads the loop's item is left to the host (a no_log hides there when in doubt).
    per_item = deferred | loop_names if looped else deferred
    problems += _boolean_problems(play, task, variables, per_item) if play else []
    problems += environment_problems(task, variables, functools.partial(render, variables=variables,
                                                                        deferred=per_item), Deferred)
    loop = task.kw("loop")
    if loop is None:
        extra = loop_names if task.kw("with_items") is not None else frozenset()
        checked = render_args(task, variables, deferred | extra, memo)
        if task.module == "template" and not looped and not checked.problems and not checked.deferred:
            return problems + _template_file_problems(task, checked.args, variables, deferred)
        if task.module == "include_vars" and not looped and not checked.problems and not checked.deferred:
            return problems + _vars_file_problems(task, checked.args)
        if sources_exist and not looped and not checked.problems and not checked.deferred:
            missing = TaskArgs(checked.args, missing_problems(task, checked.args))
            return problems + args_told_where_set(task, missing, variables).problems
        return problems + checked.problems
    try:
        items = render(loop, variables, deferred)
    except Deferred:
        names = {loop_var, str(index_var)} if index_var else {loop_var}
        return problems + render_args(task, variables, deferred | names, memo).problems
    except TemplateError as exc:
        return [*problems, Problem(task.at("loop"), exc.bare_message, "loop")]
    if not isinstance(items, list):
        return [*problems, Problem(task.at("loop"), f"loop must be a list, got {type(items).__name__}", "loop")]
    for index, item in enumerate(items):
        layer = {loop_var: item, **({str(index_var): index} if index_var else {})}
        found = render_args(task, variables.child(layer), deferred, memo).problems
        if found:
            return problems + found  # one item's problems are enough; the others repeat them
    return problems


def runtime_names(tasks: Sequence[Task]) -> frozenset[str]:
    """Names that only get a value while the run goes on: registered results and set_fact."""
    names: set[str] = set()
    for task in tasks:
        if task.kw("register"):
            names.add(str(task.kw("register")))
        if task.module == "set_fact":
            names.update(str(k) for k in task.args)
        if task.module == "include_vars":
            names.update(_included_var_names(task))
    return frozenset(names)


def _included_var_names(task: Task) -> set[str]:
    """The names an include_vars task sets: its `name`, else the keys of its (untemplated) file."""
    if task.args.get("name"):
        return {str(task.args["name"])}
    file = str(task.args.get("file", ""))
    for folder in [*task.search_dirs("vars"), task.base_dir]:
        path = folder / file
        if file and "{{" not in file and path.is_file():
            try:
                return {str(k) for k in read_vars_file(path)}
            except (ValidationError, TemplateError):
                return set()  # the task itself says what is wrong with the file, at run time
    return set()


def _host_problems(inventory: Inventory, host: str, variables: LazyVars) -> list[Problem]:
    """Inventory variables that cannot work on this host: broken templates, bad connection settings."""
    record = inventory.hosts[host]
    pos = record.pos or SourcePos(inventory.sources[0] if inventory.sources else "<inventory>")
    problems = []
    for layer in inventory.var_layers(host):
        for name, value in layer.items():
            for text in _strings(value):
                error = check_syntax(text)
                if error:
                    problems.append(Problem(pos, f"{error} in variable '{name}' of host {host}", name))
                    break
    if not problems:
        try:
            connection_spec(host, variables)
        except TemplateError as exc:
            problems.append(Problem(pos, exc.bare_message, host))
    return problems


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@dataclass
class PreflightReport:
    """Per host, every problem found before the run (hosts without problems are not listed)."""

    hosts: list[str] = field(default_factory=list)
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    #: Problems of a play keyword rendered from no host's vars (tags, serial): every host has them.
    play_problems: list[Problem] = field(default_factory=list)

    def add(self, host: str, problems: Sequence[Problem]) -> None:
        if host not in self.hosts:
            self.hosts.append(host)
        mine = self.problems.setdefault(host, []) if problems else self.problems.get(host, [])
        mine += [p for p in problems if p not in mine]

    def static_problems(self) -> list[Problem]:
        """The problems when every host failed for the same reasons (a mistake in the files or
        the command line, not in one host): then nothing runs and the exit code is 4. A play
        keyword's problem is such a mistake whatever the hosts' own are: all are told."""
        if self.play_problems:
            return self.listing()
        if not self.hosts or set(self.problems) != set(self.hosts):
            return []
        # Compared where each is used: every host setting the same bad value in its own
        # host_vars file is one mistake, told once per file. A task line reached twice (a file
        # imported twice, a role played by two plays) is told once per place that set its value
        # on one host: the same use twice there is still one mistake.
        first = _uses(self.problems[self.hosts[0]])
        return self.listing() if all(_uses(self.problems[h]) == first for h in self.hosts) else []

    def listing(self) -> list[Problem]:
        """Each distinct problem once, naming its hosts unless it holds for every host checked."""
        hosts_of: dict[Problem, list[str]] = {}
        for host in self.hosts:
            for problem in self.problems.get(host, []):
                hosts_of.setdefault(problem, []).append(host)
        return [p if hosts == self.hosts else
                dataclasses.replace(p, message=f"on host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)}: "
                                               f"{p.message}")
                for p, hosts in hosts_of.items()]


def _uses(problems: Sequence[Problem]) -> list[Problem]:
    """The problems told where each is used, each once, in order."""
    return list(dict.fromkeys(p.at_use() for p in problems))


def run_preflight(playbook: Playbook, plays_hosts: Sequence[Sequence[str]], variables: VariableManager,
                  selected: Callable[[Task, Play], bool] = lambda task, play: True,
                  masker: Masker | None = None, memo: Memo | None = None) -> PreflightReport:
    """Check every selected task of every play for each of the play's hosts. `masker` learns
    the secrets of every variable set that a problem was found with (a problem may quote a
    value: a play's or a task's secret-named var, not only the inventory's and -e's)."""
    report = PreflightReport()
    deferred = runtime_names([t for play in playbook.plays for t in play_tasks(play)])
    memo = {} if memo is None else memo
    made_before = False  # a task of an earlier play may have made a controller path
    for play, hosts in zip(playbook.plays, plays_hosts, strict=True):
        tasks = [t for t in play_tasks(play) if selected(t, play)]
        made_in_play = made_before
        for host in hosts:
            host_vars = variables.for_task(play, None, host, list(hosts))
            found = _host_problems(variables.inventory, host, host_vars)
            if found and masker is not None:
                masker.add_vars(host_vars)
            local, made = host_is_local(host_vars), made_before
            if not found:
                for task in tasks:
                    task_vars = variables.for_task(play, task, host, list(hosts))
                    found_here = check_task(task, task_vars, deferred, memo, play, sources_exist=not made)
                    told = _as_told(play, task, task_vars, found_here, masker)
                    found += [p for p in told if p not in found]
                    made = made or may_make_files_here(task, local)
            made_in_play = made_in_play or any(may_make_files_here(t, local) for t in tasks)
            report.add(host, found)
        made_before = made_in_play
    report.play_problems = [p for play, hosts in zip(playbook.plays, plays_hosts, strict=True) if hosts
                            for p in _play_problems(play, variables.extra_vars)]
    for host in report.hosts:
        report.add(host, report.play_problems)
    return report


def _play_problems(play: Play, extra_vars: Mapping[str, Any]) -> list[Problem]:
    """The play's keywords that are rendered from no host's vars (tags, serial), checked."""
    serial = serial_problem(play, extra_vars)
    return [*tags_problems(play, extra_vars), *([serial] if serial else [])]


#: What a `no_log` task's problem says instead of its message (which may quote its arguments).
NO_LOG_PROBLEM = "a problem here; its details are hidden: no_log is set on this task"


def _as_told(play: Play, task: Task, variables: LazyVars, problems: list[Problem],
             masker: Masker | None) -> list[Problem]:
    """A task's problems as they may be printed: its variables' secrets known to the masker, and
    under `no_log` only where they are and the key at fault."""
    if not problems:
        return problems
    if masker is not None:
        masker.add_vars(variables)
    if task_no_log(play, task, variables):  # a no_log that is no boolean hides too, yet is told itself
        # Told at the task, not where a variable was set: its message there would say what. A
        # problem of the no_log keyword itself is told as it is; one told where a variable was
        # set has the variable's name as its key (`no_log` too, a name its user chose): its use's.
        return [p if p.at_use().key_path == "no_log" else dataclasses.replace(p.at_use(), message=NO_LOG_PROBLEM)
                for p in problems]
    return problems


def check_playbook(playbook: Playbook, inventory: Inventory, extra_vars: Mapping[str, Any],
                   masker: Masker | None = None) -> PreflightReport:
    """`opsrunner check`: preflight of every play for every inventory host it targets (`masker`:
    see run_preflight)."""
    variables = VariableManager(inventory, extra_vars, check_mode=False)
    plays_hosts: list[list[str]] = []
    pattern_problems: list[Problem] = []
    for play in playbook.plays:
        try:
            plays_hosts.append(inventory.select(str(template_value(play.hosts, LazyVars([extra_vars])))))
        except (TemplateError, PatternError, ValueError) as exc:
            pattern_problems.append(hosts_problem(play, exc))
            plays_hosts.append([])
    report = run_preflight(playbook, plays_hosts, variables, masker=masker)
    if pattern_problems:
        for host in report.hosts or ["*"]:
            report.add(host, pattern_problems)
    return report


def hosts_problem(play: Play, exc: Exception) -> Problem:
    """A play's `hosts:` that cannot be evaluated (a template error, a bad pattern): bad input,
    located where it is written, the same under `check` and `play`."""
    why = exc.bare_message if isinstance(exc, TemplateError) else str(exc)
    return Problem(play.hosts_pos or play.pos, f"hosts pattern {play.hosts!r}: {why}", "hosts")


def play_tasks(play: Play) -> list[Task]:
    return [*iter_tasks(play.tasks), *play.handlers]
