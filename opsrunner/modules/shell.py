"""shell: run a script with /bin/sh (or another shell) on the target."""

from __future__ import annotations

from typing import Any

from opsrunner.modules.command import CommandModule


class ShellModule(CommandModule):
    """Like command, but a shell (default /bin/sh) runs the script; the script reaches it on
    stdin (connections/stdinscript.py), so it never shows in the target's process list."""

    name = "shell"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        return []  # the shell parses the script, not opsrunner

    def argv(self, args: dict[str, Any]) -> list[str]:
        return [args.get("executable", "/bin/sh")]

    def script(self, args: dict[str, Any]) -> str:
        return str(args["cmd"])


MODULE = ShellModule()
