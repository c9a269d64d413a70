"""Scripts and environment variables travel on stdin, never in the target's argv.

Anything in argv (or in `env K=V` argv) is readable by every user of the target through
/proc/PID/cmdline while the command runs. So a shell task's script and a task's `env`
are sent as a header at the start of stdin: a line count, then that many lines. A tiny
POSIX reader (the only thing in argv) reads exactly those lines - `read` takes one byte
at a time from a pipe, so the rest of stdin is left for the command - and `eval`s them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

#: The reader passed with `-c` to the shell. Its variable names cannot clash with the
#: script's ordinary ones; the script then runs in this same shell (`$0`, `exit` as usual).
READER = (
    "IFS= read -r opsrunner_n || exit 125\n"
    "opsrunner_s=\n"
    'while [ "$opsrunner_n" -gt 0 ]; do IFS= read -r opsrunner_l || exit 125; '
    'opsrunner_s="$opsrunner_s$opsrunner_l\n"; opsrunner_n=$((opsrunner_n - 1)); done\n'
    "unset opsrunner_n opsrunner_l\n"
    'eval "$opsrunner_s"'
)


def exports(env: Mapping[str, str] | None) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())


def header(body: str) -> bytes:
    lines = body.split("\n")
    return (f"{len(lines)}\n" + "\n".join(lines) + "\n").encode()


def shell_script(shell: Sequence[str], script: str, env: Mapping[str, str] | None) -> tuple[list[str], str]:
    """argv and stdin body that run `script` with `shell` (e.g. ["/bin/sh"]), env exported."""
    return [*shell, "-c", READER], exports(env) + script


def with_env(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], str]:
    """argv and stdin body that run `argv` (exec'd, no shell parsing) with `env` exported."""
    return ["/bin/sh", "-c", READER, "opsrunner-env", *argv], exports(env) + 'exec "$@"'
