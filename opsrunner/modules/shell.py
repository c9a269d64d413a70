"""shell: run a script with /bin/sh (or another shell) on the target."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.command import CommandModule


class ShellModule(CommandModule):
    """Like command, but the script goes to `EXECUTABLE -c SCRIPT` (default /bin/sh)."""

    name = "shell"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        return []  # the shell parses the script, not opsrunner

    def argv(self, args: dict[str, Any]) -> list[str]:
        return [args.get("executable", "/bin/sh"), "-c", args["cmd"]]


MODULE = ShellModule()
