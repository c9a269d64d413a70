"""The exec-wrapper chain: composable layers, each quoted for exactly what it hands on.

The innermost command is an argv. Each layer wraps the argv of the layer inside it:
an `ArgvLayer` (e.g. `pct exec 200 --`, `docker exec -i c`, `sudo -n`) prepends its
prefix and passes the argv on unchanged, because those tools exec their argv directly;
a `ShellLayer` (e.g. a nested `ssh host`) hands a single string to a remote shell, so
the inner argv is joined with `shlex.join` first. The SSH transport itself is a shell
layer: what goes over the wire is `shlex.join(argv)`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from opsrunner.connections.become import BecomeLayer
from opsrunner.packagedata import package_text


@dataclass(frozen=True)
class ArgvLayer:
    prefix: tuple[str, ...]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]


@dataclass(frozen=True)
class ShellLayer:
    prefix: tuple[str, ...]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, shlex.join(argv)]


Layer = ArgvLayer | ShellLayer | BecomeLayer


def stdin_prefix(chain: Sequence[Layer]) -> bytes:
    """What the chain's layers read from stdin before the command's own (a become password)."""
    return b"".join(layer.stdin_prefix() for layer in chain if isinstance(layer, BecomeLayer))


def parse_layer(item: object) -> Layer:
    """A wrapper item from the inventory: a prefix string, or {shell: prefix}."""
    if isinstance(item, dict):
        return ShellLayer(tuple(shlex.split(str(item["shell"]))))
    prefix = tuple(shlex.split(str(item)))
    if not prefix:
        raise ValueError("empty wrapper prefix")
    return ArgvLayer(prefix)


def parse_chain(value: object) -> tuple[Layer, ...]:
    if value in (None, "", []):
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(parse_layer(item) for item in items)


@lru_cache(maxsize=1)
def watchdog_source() -> str:
    """remote/watchdog.py, whole: it imports nothing of opsrunner (its header says why), and its
    first line is the marker that kill_old and verify know it by."""
    return package_text("remote/watchdog.py")


#: The outer watchdog's deadline is this much later than the inner one's, so that the inner
#: one (which sees the command's own tree) normally acts first.
OUTER_GRACE_S = 2.0

_CD_SCRIPT = 'cd -- "$0" || exit 125; exec "$@"'


def build_argv(
    argv: Sequence[str],
    chain: Sequence[Layer],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = None,
    python: str = "python3",
    watchdog: str | None = None,
    outer_python: str = "python3",
    guard_chain: bool = False,
) -> list[str]:
    """Compose the full argv, innermost first: cwd, env, watchdog, wrappers outermost-last,
    and, when there are wrappers, an outer watchdog around the whole chain.

    The outer watchdog runs where the chain starts. It kills a wrapper that hangs
    (OUTER_GRACE_S after the deadline) and notices the ssh session going away even when a
    wrapper keeps the inner watchdog's pipes open; it then kills the whole tree, wrappers
    and all. With `guard_chain` and no timeout (a long-lived agent), the outer watchdog has no
    deadline and only does the latter. Connection.run passes no `env`: task environments
    travel on stdin.
    `watchdog` stands in for the watchdog's source (the -vvv log shows a placeholder)."""
    full = list(argv)
    if cwd:
        full = ["/bin/sh", "-c", _CD_SCRIPT, cwd, *full]
    if env:
        full = ["env", *(f"{k}={v}" for k, v in env.items()), *full]
    if timeout:
        full = [python, "-S", "-c", watchdog or watchdog_source(), f"{timeout:g}", *full]
    for layer in reversed(chain):
        full = layer.wrap(full)
    if chain and (timeout or guard_chain):
        limit = f"{timeout + OUTER_GRACE_S:g}" if timeout else "none"
        full = [outer_python, "-S", "-c", watchdog or watchdog_source(), limit, *full]
    return full
