"""Golden tests of the final command line, and the chain's quoting through real shells."""

from __future__ import annotations

import shlex
import subprocess

from opsrunner.connections.wrappers import ArgvLayer, ShellLayer, build_argv, parse_chain

SCRIPT = "echo \"it's $HOME\"; a && b || c\nünï `x`"


def test_golden_argv_chain() -> None:
    chain = parse_chain(["sudo -n", "pct exec 200 --"])
    argv = build_argv(["/bin/sh", "-c", SCRIPT], chain)
    assert argv == ["sudo", "-n", "pct", "exec", "200", "--", "/bin/sh", "-c", SCRIPT]
    # What the ssh transport sends: one shell-quoted string the login shell parses once.
    assert shlex.join(argv) == (
        "sudo -n pct exec 200 -- /bin/sh -c 'echo \"it'\"'\"'s $HOME\"; a && b || c\nünï `x`'"
    )


def test_golden_env_cwd_timeout_layers() -> None:
    argv = build_argv(["true"], (ArgvLayer(("docker", "exec", "-i", "c")),), env={"A": "1 2"},
                      cwd="/w d", timeout=2.5, python="python3")
    assert argv[:4] == ["docker", "exec", "-i", "c"]
    assert argv[4:7] == ["python3", "-S", "-c"]
    assert argv[7].startswith("# opsrunner-watchdog")
    assert argv[8:] == ["2.5", "env", "A=1 2", "/bin/sh", "-c", 'cd -- "$0" || exit 125; exec "$@"', "/w d", "true"]


def test_shell_layer_quotes_its_inner_argv() -> None:
    argv = build_argv(["/bin/sh", "-c", SCRIPT], (ShellLayer(("sh", "-c")),))
    assert argv == ["sh", "-c", shlex.join(["/bin/sh", "-c", SCRIPT])]


def test_round_trip_through_nested_real_shells() -> None:
    # Two shell layers (like ssh -> ssh) plus an argv layer, executed for real.
    chain = (ShellLayer(("sh", "-c")), ArgvLayer(("env",)), ShellLayer(("bash", "-c")))
    argv = build_argv(["printf", "%s", SCRIPT], chain)
    out = subprocess.run(argv, capture_output=True, check=True).stdout.decode()
    assert out == SCRIPT
