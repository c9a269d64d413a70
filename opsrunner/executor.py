"""One task on one host: when, loop, until/retries, the module, changed_when/failed_when."""

from __future__ import annotations

import time
from typing import Any

from opsrunner.argcheck import Memo, TaskArgs, memo_check
from opsrunner.connections.base import Connection
from opsrunner.deadlines import module_default, seconds
from opsrunner.errors import ConnectionFailed, ModuleFailure, TemplateError
from opsrunner.ledger import CheckLedger
from opsrunner.modules.base import TaskContext, TimedOut
from opsrunner.modules.registry import get_module, module_info
from opsrunner.playbook import Task
from opsrunner.preflight import keyword_number
from opsrunner.results import Status, TaskResult
from opsrunner.taskconnection import EnvConnection, environment
from opsrunner.templating import LazyVars, mark_unsafe, template_value, truthy
from opsrunner.templating.filters import flatten


class TaskExecutor:
    """Runs a task for one host; never raises for task-level problems, returns a TaskResult."""

    def __init__(self, task: Task, host: str, variables: LazyVars, connection: Connection,
                 check_mode: bool, diff_mode: bool, ledger: CheckLedger | None = None,
                 play_timeout: Any = None, checked: Memo | None = None) -> None:
        self.task = task
        #: The run's argument checks by (task, rendered arguments), shared by its hosts.
        self.checked = checked
        self.play_timeout = play_timeout
        self.host = host
        self.variables = variables
        self.connection = connection
        self.check_mode = check_mode
        self.diff_mode = diff_mode
        self.ledger = ledger if ledger is not None else CheckLedger()

    def run(self) -> TaskResult:
        start = time.monotonic()
        try:
            result = self._run()
        except ConnectionFailed as exc:
            result = TaskResult(Status.UNREACHABLE, msg=str(exc))
        except TemplateError as exc:
            where = f"{self.task.pos}: " if exc.pos is None else ""
            result = TaskResult(Status.FAILED, msg=f"{where}{exc} in task '{self.task.name}'")
        result.duration_s = time.monotonic() - start
        return result

    def _run(self) -> TaskResult:
        when = self.task.kw("when")
        if self.task.kw("loop") is None and self.task.kw("with_items") is None:
            if when is not None and not truthy(when, self.variables):
                return _skipped(when)
            return self._run_with_retries(self.variables)
        try:
            items = self._loop_items()
        except TemplateError:
            # As ansible-core: a loop that cannot be templated is no error when `when` is false.
            if when is not None and not truthy(when, self.variables):
                return _skipped(when)
            raise
        return self._run_loop(items, when)

    def _loop_items(self) -> list[Any]:
        with_items = self.task.kw("with_items")
        items = template_value(self.task.kw("loop") if with_items is None else with_items, self.variables)
        if with_items is not None:  # with_items flattens one level, and takes a single value
            items = flatten(items if isinstance(items, list) else [items], levels=1, skip_nulls=False)
        if not isinstance(items, list):
            raise TemplateError(f"loop must be a list, got {type(items).__name__}", self.task.at("loop"), "loop")
        return items

    def _run_loop(self, items: list[Any], when: Any) -> TaskResult:
        control = {k: v if k == "label" else template_value(v, self.variables)  # label: per item
                   for k, v in (self.task.kw("loop_control") or {}).items()}
        loop_var = str(control.get("loop_var", "item"))
        results = []
        for index, item in enumerate(items):
            if index and control.get("pause"):
                time.sleep(float(control["pause"]))
            layer = _loop_layer(items, index, loop_var, control)
            item_vars = self.variables.child(layer)
            # `when` is evaluated per item, with the loop variable set (loop first, then when).
            r = _skipped(when) if when is not None and not truthy(when, item_vars) \
                else self._run_with_retries(item_vars)
            r.item = item
            r.data.update({k: v for k, v in layer.items() if k != "item"})
            if control.get("index_var"):
                r.data["ansible_index_var"] = str(control["index_var"])
            if "label" in control:
                r.label = template_value(control["label"], item_vars)
            results.append(r)
            if r.status == Status.UNREACHABLE:
                break
        return _aggregate(results)

    def _run_with_retries(self, variables: LazyVars) -> TaskResult:
        """until/retries as ansible-core: `retries` alone retries until the task succeeds; the
        registered `attempts` is the run that passed, or `retries` when they ran out; a
        `failed_when` on the task decides the final status when they run out."""
        until = self.task.kw("until")
        retries_kw = self.task.kw("retries")
        if until is None and retries_kw is None:
            return self._run_once(variables)
        retries = max(0, int(keyword_number(self.task, "retries", variables))) if retries_kw is not None else 3
        delay = keyword_number(self.task, "delay", variables) if self.task.kw("delay") is not None else 5.0
        attempt = 0
        while True:
            attempt += 1
            result = self._run_once(variables)
            if result.status == Status.UNREACHABLE:
                return result
            done = truthy(until, self._with_registered(variables, result)) if until is not None \
                else not result.failed
            if done:
                result.data["attempts"] = attempt
                return result
            if attempt > retries:
                result.data["attempts"] = retries
                if self.task.kw("failed_when") is None:
                    result.status = Status.FAILED
                    result.msg = f"retries exhausted ({attempt} attempts): {result.msg}".rstrip(": ")
                return result
            time.sleep(delay)

    def _run_once(self, variables: LazyVars) -> TaskResult:
        connection = self._connection(variables)
        info = module_info(self.task.module)
        if self.check_mode and not info.check_mode:
            return TaskResult(Status.SKIPPED, msg=f"{self.task.module} does not support check mode",
                              check_mode_unsupported=True)
        checked = self._check(template_value(self.task.args, variables))
        if checked.problems:
            raise TemplateError("invalid arguments after templating: " + "; ".join(
                f"{p.message} (at {p.key_path})" for p in checked.problems), checked.problems[0].pos)
        args = checked.args
        ctx = TaskContext(
            host=self.host, task=self.task, connection=connection, variables=variables,
            check_mode=self.check_mode, diff_mode=self.diff_mode, ledger=self.ledger,
            timeout=self._deadline(args, variables),
        )
        try:
            result = get_module(self.task.module).run(ctx, args)
        except ModuleFailure as exc:
            result = TaskResult(Status.FAILED, msg=str(exc), data=dict(exc.data))
        except TimedOut as exc:
            result = TaskResult(Status.TIMED_OUT, rc=exc.result.rc, stdout=exc.result.stdout,
                                stderr=exc.result.stderr,
                                msg=f"timed out after {ctx.timeout:g}s; the command and every process "
                                    "it started were killed on the target")
        if ctx.notes:
            result.data.setdefault("notes", []).extend(ctx.notes)
        return self._apply_conditions(result, variables)

    def _connection(self, variables: LazyVars) -> Connection:
        """The connection with the task's `environment` on its commands, rendered with these
        variables: a loop's item's (`environment: {X: "{{ item }}"}`), as in ansible-core."""
        env = environment(self.task, variables)
        return EnvConnection(self.connection, env) if env else self.connection

    def _check(self, rendered: dict[str, Any]) -> TaskArgs:
        """The arguments' check; made once per distinct rendering in a run (preflight made most)."""
        checked = memo_check(self.task, rendered, False, self.checked)
        return TaskArgs(dict(checked.args), checked.problems)

    def _deadline(self, args: dict[str, Any], variables: LazyVars) -> float | None:
        """The task's `timeout`, else the play's, else the module's default (deadlines.py)."""
        value = self.task.kw("timeout", self.play_timeout)
        if value is None:
            value = module_default(self.task.module, args, variables)
        if value is None:
            return None  # runs on the controller only
        try:
            return seconds(template_value(value, variables))
        except ValueError as exc:
            raise TemplateError(str(exc), self.task.at("timeout"), "timeout") from None

    def _with_registered(self, variables: LazyVars, result: TaskResult) -> LazyVars:
        name = self.task.kw("register")
        registered = mark_unsafe(result.registered())  # host data: never templated again
        layer: dict[str, Any] = {name: registered} if name else {}
        # Ansible lets until/changed_when/failed_when read the result's fields directly too.
        return variables.child(registered, layer)

    def _apply_conditions(self, result: TaskResult, variables: LazyVars) -> TaskResult:
        if result.status in (Status.SKIPPED, Status.UNREACHABLE):
            return result
        changed_when = self.task.kw("changed_when")
        failed_when = self.task.kw("failed_when")
        if changed_when is None and failed_when is None:
            return result
        scoped = self._with_registered(variables, result)
        if changed_when is not None and result.status != Status.TIMED_OUT:
            result.changed = truthy(changed_when, scoped)
            if not result.failed:
                result.status = Status.CHANGED if result.changed else Status.OK
        if failed_when is not None and result.status != Status.TIMED_OUT:
            if truthy(failed_when, scoped):
                result.status = Status.FAILED
                result.msg = result.msg or "failed_when condition was true"
            else:
                result.status = Status.CHANGED if result.changed else Status.OK
        return result


def _loop_layer(items: list[Any], index: int, loop_var: str, control: dict[str, Any]) -> dict[str, Any]:
    """The loop variables of one item: loop_var, index_var, and ansible_loop when extended."""
    layer: dict[str, Any] = {loop_var: items[index], "ansible_loop_var": loop_var}
    if control.get("index_var"):
        layer[str(control["index_var"])] = index
    if control.get("extended"):
        last = len(items) - 1
        layer["ansible_loop"] = {
            "allitems": items, "index": index + 1, "index0": index, "revindex": len(items) - index,
            "revindex0": last - index, "first": index == 0, "last": index == last, "length": len(items),
            **({"previtem": items[index - 1]} if index > 0 else {}),
            **({"nextitem": items[index + 1]} if index < last else {}),
        }
    return layer


def _skipped(when: Any) -> TaskResult:
    return TaskResult(Status.SKIPPED, msg="Conditional result was False",
                      data={"false_condition": when})


def _aggregate(results: list[TaskResult]) -> TaskResult:
    if not results:
        return TaskResult(Status.SKIPPED, msg="No items in the list", data={"results": []})  # ansible-core's
    order = [Status.UNREACHABLE, Status.TIMED_OUT, Status.FAILED]
    status = next((s for s in order if any(r.status == s for r in results)), None)
    changed = any(r.changed for r in results)
    if status is None:
        if all(r.status == Status.SKIPPED for r in results):
            status = Status.SKIPPED
        else:
            status = Status.CHANGED if changed else Status.OK
    failed = [r for r in results if r.failed]
    msg = failed[0].msg if failed else "All items skipped" if status == Status.SKIPPED else "All items completed"
    return TaskResult(status, msg=msg, changed=changed, items=results,
                      warnings=[w for r in results for w in r.warnings],
                      stdout="\n".join(r.stdout for r in results if r.stdout),
                      stderr="\n".join(r.stderr for r in results if r.stderr))
