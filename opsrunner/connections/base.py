"""The Connection interface every transport implements, and the resolved connection settings."""

from __future__ import annotations

import abc
import contextlib
import io
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from opsrunner import idle
from opsrunner.connections.agent import AgentSession, AgentStartFailed
from opsrunner.connections.become import EXIT_REFUSED, REFUSED
from opsrunner.connections.startslots import StartSlots
from opsrunner.connections.stdinscript import header, shell_script, with_env
from opsrunner.connections.streams import Stream, prefixed
from opsrunner.connections.wrappers import Layer, build_argv, stdin_prefix
from opsrunner.results import CommandResult

#: Called with each command line exactly as it is sent (for -vvv).
CommandLogger = Callable[[str, str], None]


@dataclass(frozen=True)
class ConnectionSpec:
    """Connection settings of one inventory host, after templating."""

    name: str
    kind: str = "ssh"
    host: str = ""
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    known_hosts_file: str | None = None
    connect_timeout: float = 10.0
    host_key_checking: str = "strict"
    wrapper: tuple[Layer, ...] = ()
    python: str = "python3"
    #: How shell/command tasks run: "agent" (a fork+exec by the long-lived agent), "bare" (an
    #: exec of their own on the connection, under the deadline watchdog), or "auto".
    command_exec: str = "auto"

    @property
    def commands_via_agent(self) -> bool:
        """auto: by the agent, unless there is a wrapper chain. Behind a chain each command
        gets an exec session of its own, so that what the chain does when a session ends
        (`pct exec` kills what the command left running) happens after that command, as the
        user sees it by hand, and not only when the run's agent session ends."""
        return self.command_exec == "agent" or (self.command_exec == "auto" and not self.wrapper)
    extra: dict[str, str] = field(default_factory=dict)


class Connection(abc.ABC):
    """Runs argv commands on one host (through its wrapper chain) and moves file content.

    `run` takes the innermost argv. The connection wraps it, outermost last, as:
    the wrapper chain (e.g. `pct exec 200 --`), the deadline watchdog when a timeout is
    given, `env`/`cd` setup, then the argv itself.
    """

    def __init__(self, spec: ConnectionSpec, log: CommandLogger | None = None,
                 slots: StartSlots | None = None) -> None:
        self.spec = spec
        self.log = log
        #: Shared by the run's connections: how many may be starting at once (startslots.py).
        self.slots = slots if slots is not None else StartSlots()
        self._agent: AgentSession | None = None
        self._agent_failed = False

    @abc.abstractmethod
    def open(self) -> None:
        """Connect (idempotent). Raises ConnectionFailed if the host cannot be reached."""

    @abc.abstractmethod
    def close(self) -> None:
        """Disconnect; stop anything still running for this connection (the agent first)."""

    def agent(self) -> AgentSession:
        """This connection's long-lived remote agent (started on its first request)."""
        if self._agent is None:
            self._agent = AgentSession(self)
        return self._agent

    def session_agent(self) -> AgentSession:
        """A second agent on an exec session of its own, not kept: for a step whose effect must
        be seen to outlive the session that made it. The caller ends it (end())."""
        return AgentSession(self)

    def _close_agent(self) -> None:
        if self._agent is not None:
            self._agent.end()

    def lost_job_locks(self) -> dict[str, tuple[str, bool]]:
        """Once closed: {inventory host: (why, told)} for the job locks this run held here that
        went before the run let go of them (`told`: a task on that host was told, JobLocksLost):
        the run then does not end ok (engine._report_lost_locks)."""
        agent = self._agent
        if agent is None or agent.lost_at_end is None:
            return {}
        return dict.fromkeys(sorted(agent.held_for) or [self.spec.name], agent.lost_at_end)

    def spawn(self, argv: Sequence[str], shown: str | None = None) -> Stream:
        """Start a long-lived argv through the wrapper chain; its stdin/stdout as a Stream.

        `shown` replaces the innermost argv in the -vvv log (the agent's source is not printed)."""
        # Behind a wrapper chain, the outer watchdog (no deadline) stops a hung wrapper or what
        # the chain left behind when the stream is closed or the session goes.
        full = build_argv(argv, self.spec.wrapper, python=self.spec.python, guard_chain=True)
        if self.log:
            logged = build_argv(["{inner}"] if shown else argv, self.spec.wrapper, python=self.spec.python,
                                guard_chain=True, watchdog="<opsrunner-watchdog>")
            line = shlex.join(logged).replace("'<opsrunner-watchdog>'", "<opsrunner-watchdog>")
            self.log(self.spec.name, line.replace("{inner}", shown) if shown else line)
        stream = self._spawn(full)
        secret = stdin_prefix(self.spec.wrapper)
        if secret:  # read by the become layer before the agent's protocol starts
            with contextlib.suppress(OSError, EOFError):  # gone already: the agent's start says why
                stream.send(secret)
        return stream

    def session_lost(self) -> bool:
        """True when the transport itself is gone (the host is then unreachable, not failed)."""
        return False

    def lost_because(self) -> str | None:
        """Why the transport is gone, where more is known than that (a worker process that held
        it ended, and how); None otherwise."""
        return None

    @abc.abstractmethod
    def _spawn(self, argv: Sequence[str]) -> Stream:
        """Start a fully wrapped argv on the host, stdin and stdout connected (transport-specific)."""

    @abc.abstractmethod
    def _execute(self, argv: Sequence[str], stdin: bytes | IO[bytes] | None,
                 timeout: float | None) -> CommandResult:
        """Run a fully wrapped argv on the host (transport-specific)."""

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | IO[bytes] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        script: str | None = None,
    ) -> CommandResult:
        """Run `argv`; with `script`, argv is the shell (e.g. ["/bin/sh"]) that runs it.

        The script and `env` go on stdin ahead of `stdin` (stdinscript.py), so neither
        shows in the target's process list.
        """
        argv, body = _on_stdin(argv, script, env)
        full = build_argv(argv, self.spec.wrapper, cwd=cwd, timeout=timeout, python=self.spec.python)
        if self.log:  # once per command, with the watchdog's source left out
            shown = shlex.join(build_argv(argv, self.spec.wrapper, cwd=cwd, timeout=timeout,
                                          python=self.spec.python, watchdog="<opsrunner-watchdog>"))
            self.log(self.spec.name, _with_script(shown.replace("'<opsrunner-watchdog>'", "<opsrunner-watchdog>"),
                                                  body))
        if body is not None:
            stdin = prefixed(header(body), stdin)
        secret = stdin_prefix(self.spec.wrapper)
        if secret:  # the become layer reads it first (connections/become.py)
            stdin = prefixed(secret, stdin)
        return self._execute(full, stdin, timeout)

    def run_command(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | IO[bytes] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        script: str | None = None,
        notes: list[str] | None = None,
    ) -> CommandResult:
        """A task's plain command, as `run` runs it, but through this host's long-lived agent:
        one fork+exec on the target instead of a Python watchdog started per command (and two
        behind a wrapper chain). Behind a wrapper chain (by default), with `command_exec: bare`,
        or where the agent cannot start, it is a bare exec (`run`)."""
        if not self.spec.commands_via_agent or self._agent_failed:
            idle.run()  # a bare exec waits for its command: what this thread put off (idle.py) goes first
        if self.spec.commands_via_agent and not self._agent_failed:
            inner, body = _on_stdin(argv, script, env)
            data = stdin if body is None else prefixed(header(body), stdin)
            payload = io.BytesIO(data) if isinstance(data, bytes) else data
            try:
                return self.agent().exec(inner, stdin=payload, cwd=cwd, timeout=timeout, notes=notes,
                                         shown=_shown_exec(inner, body, cwd) if self.log else None)
            except AgentStartFailed as exc:  # nothing was sent: the command runs as a bare exec
                self._agent_failed = True
                if notes is not None:
                    notes.append(f"{exc}; commands on this host run as bare execs")
        elif self.spec.wrapper and not self._agent_failed:
            # A bare exec cannot tell a wrapper that hangs before the command from a slow
            # command: the agent's start, bounded by connect_timeout, proves the chain first.
            started = time.monotonic()
            try:
                self.agent().ensure_reached(notes, None if timeout is None else started + timeout)
            except AgentStartFailed as exc:
                if REFUSED in str(exc):  # a bare exec would only be refused again, after sudo's delay
                    return CommandResult(shlex.join(argv), EXIT_REFUSED, b"", str(exc).encode(),
                                         time.monotonic() - started)
                self._agent_failed = True
                if notes is not None:
                    notes.append(f"{exc}; commands on this host run as bare execs")
            except TimeoutError:  # the task's own deadline came first: the task timed out
                return CommandResult(shlex.join(argv), 124, b"", b"the wrapper chain did not run the command "
                                     b"within the task's timeout; it was stopped", time.monotonic() - started,
                                     timed_out=True)
        if script is None and (timeout or self.spec.wrapper):
            # The words go on stdin, as a shell task's script does: in argv, the watchdog and the
            # chain's layers around the command would carry them, and its own `pkill -f` of
            # them would kill those (the field notes' first incident).
            argv, script = ["/bin/sh"], "exec " + shlex.join(argv)
        what = "the command's result"
        self.confirm_job_locks(what)  # not run on a host whose job locks went
        result = self.run(argv, stdin=stdin, env=env, cwd=cwd, timeout=timeout, script=script)
        self.confirm_job_locks(what)  # nor its result taken after a gap past their lease, unconfirmed
        return result

    def confirm_job_locks(self, what: str) -> None:
        """Around work outside this host's agent (a bare exec, a session agent of its own):
        JobLocksLost when the job locks its agent holds for the run went, or may have (a gap
        past half their lease) and the agent does not confirm them (AgentSession.confirm_if_paused).
        Nothing at all where no lock was taken: no request in the common case."""
        agent = self._agent
        if agent is not None and (agent.locks or agent.lost_since_taken()):
            agent.confirm_if_paused(what)

    def shell(self, script: str, **kwargs: object) -> CommandResult:
        return self.run(["/bin/sh"], script=script, **kwargs)  # type: ignore[arg-type]

    def put(self, content: bytes | IO[bytes], path: str, mode: int | None = None,
            timeout: float | None = None) -> CommandResult:
        """Write content to `path` on the target (inside the wrapper chain), atomically."""
        script = (
            'set -e; dir=$(dirname -- "$1"); tmp=$(mktemp "$dir/.opsrunner.XXXXXX"); '
            'trap \'rm -f -- "$tmp"\' EXIT; cat > "$tmp"; '
            'if [ -n "$2" ]; then chmod "$2" "$tmp"; '
            'elif [ -e "$1" ]; then chmod "$(stat -c %a -- "$1")" "$tmp"; '
            'else chmod 644 "$tmp"; fi; mv -f -- "$tmp" "$1"; trap - EXIT'
        )
        mode_arg = "" if mode is None else format(mode, "o")
        return self.run(["/bin/sh", "-c", script, "opsrunner-put", path, mode_arg],
                        stdin=content, timeout=timeout)

    def get(self, path: str, timeout: float | None = None) -> CommandResult:
        """Read a file's content from the target (inside the wrapper chain)."""
        return self.run(["cat", "--", path], timeout=timeout)


def _on_stdin(argv: Sequence[str], script: str | None,
              env: Mapping[str, str] | None) -> tuple[list[str], str | None]:
    """The argv to run and the body that goes on stdin ahead of the command's own stdin."""
    if script is not None:
        return shell_script(argv, script, env)
    if env:
        return with_env(argv, env)
    return list(argv), None


def _with_script(shown: str, body: str | None) -> str:
    if body is None:
        return shown
    return shown + "\n    script on stdin:\n" + "\n".join("    | " + ln for ln in body.splitlines())


def _shown_exec(argv: Sequence[str], body: str | None, cwd: str | None) -> str:
    """How -vvv shows a command run by the agent: its argv once, and a script sent on stdin."""
    return _with_script("agent exec " + shlex.join(argv) + (f" (in {cwd})" if cwd else ""), body)
