"""The exit codes of opsrunner, Ansible's where Ansible has one."""

from __future__ import annotations

from opsrunner.errors import OpsrunnerError, Terminated, ValidationError

EXIT_OK = 0
EXIT_VALIDATION = 4  # bad input: nothing was run
EXIT_USAGE = 5
EXIT_INTERRUPTED = 99  # Ctrl-C
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15, as shells and service managers expect
EXIT_UNEXPECTED = 250  # a bug: the traceback goes with it


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a command that an exception ends."""
    if isinstance(exc, ValidationError):
        return EXIT_VALIDATION
    if isinstance(exc, OpsrunnerError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    return EXIT_UNEXPECTED
