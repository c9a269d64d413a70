"""The connection a task runs over, as its keywords make it: delegate_to (to the controller),
become (a privilege layer innermost in the wrapper chain) and environment (on every command).
The engine asks here; modules never see the keywords."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from opsrunner.becomeopts import METHODS, PASSWORD_VARS, BecomeDefaults
from opsrunner.connections.agent import AgentSession
from opsrunner.connections.base import Connection, ConnectionSpec
from opsrunner.connections.become import PROMPT, REFUSED, BecomeLayer
from opsrunner.connections.streams import Stream
from opsrunner.connections.wrappers import ArgvLayer, Layer, ShellLayer
from opsrunner.envnames import refusal as environment_refusal
from opsrunner.errors import TemplateError
from opsrunner.playbook import Task
from opsrunner.results import CommandResult
from opsrunner.taskflags import flag, flag_raw
from opsrunner.templating import LazyVars, template_value

SUDO_PASSWORD_HINTS = ("a password is required", "a terminal is required")
NO_BECOME_DEFAULTS = BecomeDefaults()

#: Where `delegate_to` may send a task: the controller.
DELEGATE_TARGETS = ("localhost", "127.0.0.1")


def delegate_refusal(target: object) -> str | None:
    """Why `delegate_to` cannot send a task to `target` (rendered), or None."""
    return None if str(target) in DELEGATE_TARGETS else f"delegate_to supports only localhost, not {str(target)!r}"


def become_layer(task: Task, variables: LazyVars, defaults: BecomeDefaults = NO_BECOME_DEFAULTS) -> Layer | None:
    """The privilege layer, innermost in the wrapper chain (inside `pct exec` and the like).

    Without a password sudo runs with -n so that it fails at once instead of waiting for a
    password nobody will type; su gets the command as one quoted string for its shell. With
    one, a BecomeLayer reads it from stdin (connections/become.py).
    """
    if not flag(task, "become", variables, defaults.become):
        return None
    user = str(template_value(task.kw("become_user") or defaults.user or "root", variables))
    method = str(template_value(task.kw("become_method") or defaults.method or "sudo", variables))
    if method not in METHODS:
        raise TemplateError(f"become_method must be sudo or su, not {method!r}", task.at("become_method"),
                            "become_method")
    password = become_password(variables, defaults)
    if password:
        return BecomeLayer(method, user, password)
    if method == "sudo":
        return ArgvLayer(("sudo", "-n", "-H", "-u", user, "--"))
    return ShellLayer(("su", user, "-s", "/bin/sh", "-c"))


def become_password(variables: LazyVars, defaults: BecomeDefaults) -> str | None:
    """The `become_password` variable (or Ansible's names for it), else the one typed at -K."""
    raw = variables.raw()
    for name in PASSWORD_VARS:
        if raw.get(name) not in (None, ""):
            return str(template_value(raw[name], variables))
    return defaults.password


def task_spec(task: Task, spec: ConnectionSpec, variables: LazyVars,
              local_spec: Callable[[], ConnectionSpec],
              defaults: BecomeDefaults = NO_BECOME_DEFAULTS) -> ConnectionSpec:
    """The connection settings this task runs with: delegated to the controller (`local_spec()`),
    and/or become."""
    delegate = task.kw("delegate_to")
    if delegate is not None:
        refusal = delegate_refusal(template_value(delegate, variables))
        if refusal:
            raise TemplateError(refusal, task.at("delegate_to"), "delegate_to")
        spec = local_spec()
    layer = become_layer(task, variables, defaults)
    if layer is None:
        return spec
    # Behind a chain a local host runs helpers with the system's python3, as hostvars does: the
    # become user may not be able to reach the controller's own interpreter (a venv in /root).
    python = "python3" if spec.kind == "local" and spec.python == sys.executable else spec.python
    # A separate cached connection per become user, so plain tasks keep theirs open.
    return dataclasses.replace(spec, name=f"{spec.name}#become", wrapper=(*spec.wrapper, layer), python=python)


def environment(task: Task, variables: LazyVars) -> dict[str, str]:
    """The task's `environment`, rendered; what load and preflight could not check (it reads
    a registered result) is refused here, before a shell's `export` would echo a bad name."""
    value = template_value(task.kw("environment") or {}, variables)
    why = environment_refusal(value)
    if why is not None:
        raise TemplateError(why, task.at("environment"), "environment")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


class EnvConnection(Connection):
    """A connection whose every command gets the task's `environment`."""

    def __init__(self, inner: Connection, env: Mapping[str, str]) -> None:
        super().__init__(inner.spec, inner.log)
        self._inner = inner
        self._env = dict(env)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        """The wrapped connection is shared by the run; closing it is the factory's job."""

    def agent(self) -> AgentSession:
        """The host's long-lived agent is shared; `environment` applies to commands."""
        return self._inner.agent()

    def session_agent(self) -> AgentSession:
        return self._inner.session_agent()

    def confirm_job_locks(self, what: str) -> None:
        self._inner.confirm_job_locks(what)

    def _spawn(self, argv: Sequence[str]) -> Stream:
        return self._inner._spawn(argv)

    def _execute(self, argv: Sequence[str], stdin: bytes | IO[bytes] | None,
                 timeout: float | None) -> CommandResult:
        raise NotImplementedError  # run() below goes through the wrapped connection

    def run(self, argv: Sequence[str], *, stdin: bytes | IO[bytes] | None = None,
            env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, script: str | None = None) -> CommandResult:
        return self._inner.run(argv, stdin=stdin, env={**self._env, **(env or {})}, cwd=cwd, timeout=timeout,
                               script=script)

    def run_command(self, argv: Sequence[str], *, stdin: bytes | IO[bytes] | None = None,
                    env: Mapping[str, str] | None = None, cwd: str | None = None, timeout: float | None = None,
                    script: str | None = None, notes: list[str] | None = None) -> CommandResult:
        return self._inner.run_command(argv, stdin=stdin, env={**self._env, **(env or {})}, cwd=cwd,
                                       timeout=timeout, script=script, notes=notes)


def password_hint(task: Task, host: str, text: str, defaults: BecomeDefaults = NO_BECOME_DEFAULTS) -> str | None:
    """A clear message when sudo -n refused because it would have asked for a password, or
    when the become password was refused."""
    if not (flag_raw(task, "become") or (task.kw("become") is None and defaults.become)):
        return None
    user = task.kw("become_user") or defaults.user or "root"
    if REFUSED in text:
        said = "; ".join(dict.fromkeys(_refusal_lines(text)))
        return (f"become: the become password was refused on {host} (to run as {user})"
                + (f": {said}" if said else "") + "; check -K or the become_password variable")
    if not any(h in text for h in SUDO_PASSWORD_HINTS):
        return None
    return (f"become: sudo on {host} needs a password to run as {user}, and none was given (sudo -n): "
            "pass -K/--ask-become-pass or set the become_password variable, or allow the connecting user "
            "NOPASSWD in sudoers")


def _refusal_lines(text: str) -> list[str]:
    """What sudo or su said when refusing: sudo's lines, or what the su reader quoted of su."""
    lines = []
    for line in text.replace(PROMPT, "\n").splitlines():
        line = line.strip()
        if line.startswith("sudo:"):
            lines.append(line)
        elif REFUSED + " (su as " in line:
            lines.append(line.split("): ", 1)[-1] if "): " in line else line)
    return lines
