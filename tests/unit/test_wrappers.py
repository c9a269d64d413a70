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


def test_golden_cwd_timeout_layers_with_outer_watchdog() -> None:
    argv = build_argv(["true"], (ArgvLayer(("docker", "exec", "-i", "c")),),
                      cwd="/w d", timeout=2.5, python="/opt/py/bin/python3")
    # The outer watchdog (outside the chain, system python3) gets the deadline + 2 s.
    assert argv[:3] == ["python3", "-S", "-c"]
    assert argv[3].startswith("# opsrunner-watchdog")
    assert argv[4] == "4.5"
    assert argv[5:9] == ["docker", "exec", "-i", "c"]
    assert argv[9:12] == ["/opt/py/bin/python3", "-S", "-c"]
    assert argv[12].startswith("# opsrunner-watchdog")
    assert argv[13:] == ["2.5", "/bin/sh", "-c", 'cd -- "$0" || exit 125; exec "$@"', "/w d", "true"]
    # Without wrappers there is one watchdog; without a timeout, none.
    assert build_argv(["true"], (), timeout=3)[4:] == ["3", "true"]
    assert build_argv(["true"], (ArgvLayer(("x",)),)) == ["x", "true"]


def test_shell_layer_quotes_its_inner_argv() -> None:
    argv = build_argv(["/bin/sh", "-c", SCRIPT], (ShellLayer(("sh", "-c")),))
    assert argv == ["sh", "-c", shlex.join(["/bin/sh", "-c", SCRIPT])]


def test_round_trip_through_nested_real_shells() -> None:
    # Two shell layers (like ssh -> ssh) plus an argv layer, executed for real.
    chain = (ShellLayer(("sh", "-c")), ArgvLayer(("env",)), ShellLayer(("bash", "-c")))
    argv = build_argv(["printf", "%s", SCRIPT], chain)
    out = subprocess.run(argv, capture_output=True, check=True).stdout.decode()
    assert out == SCRIPT


def test_templated_value_stays_one_argument_in_an_argv_layer() -> None:
    from opsrunner.hostvars import connection_spec
    from opsrunner.templating import LazyVars

    injected = "200 -- /bin/sh -c 'touch X' --"
    spec = connection_spec("h", LazyVars([{"connection": "ssh", "wrapper": "pct exec {{ ctid }} --",
                                           "ctid": injected}]))
    assert spec.wrapper == (ArgvLayer(("pct", "exec", injected, "--")),)
    # Words around a template, a list-valued word, a shell layer and indirection.
    spec = connection_spec("h", LazyVars([{
        "connection": "ssh", "hop": "{{ real_hop }}", "real_hop": {"shell": "ssh -q {{ jump }}"},
        "jump": "j1; rm -rf /", "opts": ["-u", "root user"], "ctid": 7,
        "wrapper": ["{{ hop }}", "sudo {{ opts }} --", "pct exec ct{{ ctid }} --"],
    }]))
    assert spec.wrapper == (ShellLayer(("ssh", "-q", "j1; rm -rf /")),
                            ArgvLayer(("sudo", "-u", "root user", "--")),
                            ArgvLayer(("pct", "exec", "ct7", "--")))
    spec = connection_spec("h", LazyVars([{"connection": "ssh", "wrapper": "{{ w }}", "w": "pct exec {{ c }} --",
                                           "c": "1 2"}]))
    assert spec.wrapper == (ArgvLayer(("pct", "exec", "1 2", "--")),)
