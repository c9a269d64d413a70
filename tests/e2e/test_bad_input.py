"""Bad input never crashes: one line per problem with file:line, exit 4 (files) or 5 (command
line), fast, and no host contacted. The hosts of these inventories point at a TCP listener
that counts connections, so "no host contacted" is observed, not assumed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import CliResult, cli, cli_subprocess


class Trap:
    """A TCP listener that accepts, counts and closes every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()


def trap_inventory(path: Path, trap: Trap, extra: dict[str, object] | None = None) -> Path:
    host = {"connection": "ssh", "host": "127.0.0.1", "port": trap.port, "connect_timeout": 2, **(extra or {})}
    path.write_text(yaml.safe_dump({"all": {"hosts": {"h1": host, "h2": dict(host)}}}))
    return path


VALID_TASKS = """
    - shell: echo would connect
    - kill_old:
        pidfile: /nonexistent/x.pid
        grace: 3
"""


def run_bad(tmp_path: Path, trap: Trap, playbook: str, command: str = "play", *options: str,
            inventory: str | None = None) -> CliResult:
    pb = tmp_path / "pb.yml"
    pb.write_text(playbook)
    inv = tmp_path / "inv.yml"
    if inventory is None:
        trap_inventory(inv, trap)
    else:
        inv.write_text(inventory)
    before = trap.accepted
    start = time.monotonic()
    res = cli(command, str(pb), "-i", str(inv), *options, cwd=tmp_path)
    elapsed = time.monotonic() - start
    assert "Traceback" not in res.err + res.out
    assert res.rc in (4, 5), (res.rc, res.out, res.err)
    assert res.out == ""  # no play started
    errors = res.err.splitlines()
    assert errors and all(line.startswith("ERROR: ") or line.endswith("nothing was run.") for line in errors)
    # In this process (no interpreter start-up): well under a second unloaded; generous under load.
    assert elapsed < 5, elapsed
    assert trap.accepted == before
    return res


PLAY = "- hosts: all\n"


@pytest.mark.parametrize("name,playbook,args,rc,message", [
    ("vars list", PLAY + "  vars: [1]\n  tasks:" + VALID_TASKS, (), 4,
     "pb.yml:2:3: expected a mapping or nothing, got a list: [1] (at [0].vars)"),
    ("tags int", PLAY + "  tags: 5\n  tasks:" + VALID_TASKS, (), 4, "pb.yml:2:3: 5 is not valid here"),
    ("task tags int", PLAY + "  tasks:\n    - shell: x\n      tags: 5\n", (), 4, "pb.yml:4:7: 5 is not valid here"),
    ("module args a bool", PLAY + "  tasks:\n    - command: true\n", (), 4,
     "pb.yml:3:7: expected a mapping, got a boolean: True"),
    ("module args a number", PLAY + "  tasks:\n    - name: n\n      kill_old: 5\n", (), 4,
     "pb.yml:4:7: expected a mapping, got a number: 5"),
    ("timeout abc", PLAY + "  tasks:\n    - shell: echo\n      timeout: abc\n", (), 4,
     "pb.yml:4:7: timeout must be a number, not 'abc' (at timeout)"),
    ("timeout from -e", PLAY + "  tasks:\n    - shell: echo\n      timeout: '{{ t }}'\n", ("-e", "t=abc"), 4,
     "timeout must be a number, not 'abc'"),
    ("limit regex", PLAY + "  tasks:" + VALID_TASKS, ("--limit", "~(("), 5, "invalid host pattern '~(('"),
    ("json-events dir", PLAY + "  tasks:" + VALID_TASKS, ("--json-events", "/nonexistent/dir/x"), 5,
     "--json-events /nonexistent/dir/x: No such file or directory"),
    ("deep nesting", PLAY + "  vars:\n    x: " + "[" * 300 + "]" * 300 + "\n  tasks:" + VALID_TASKS, (), 4,
     "nesting deeper than 64 levels"),
    ("quote after templating", PLAY + "  tasks:\n    - command: echo {{ q }}\n      vars: {q: \"it's\"}\n", (), 4,
     "pb.yml:3:7: command cmd cannot be split into words: No closing quotation"),
    ("negative timeout from a var",
     PLAY + "  vars: {t: -5}\n  tasks:\n    - command: 'true'\n      timeout: '{{ t }}'\n", (), 4,
     "pb.yml:2:10: timeout must be a positive number of seconds, got -5 (from {{ t }}); used by timeout at "),
    ("default_timeout from -e", PLAY + "  tasks:\n    - command: 'true'\n", ("-e", "default_timeout=-3"), 4,
     "pb.yml:3:7: variable default_timeout (the deadline of a command task that sets no timeout): "
     "timeout must be a positive number of seconds, got '-3' (at default_timeout)"),
    ("play timeout from a var",
     "- hosts: all\n  timeout: '{{ pt }}'\n  vars: {pt: 0}\n  tasks:\n    - command: 'true'\n", (), 4,
     "pb.yml:3:10: timeout must be a positive number of seconds, got 0 (from {{ pt }}); used by timeout at "),
    ("loop not a list, at its line", PLAY + "  tasks:\n    - debug: {msg: x}\n      loop: '{{ 5 }}'\n", (), 4,
     "pb.yml:4:7: loop must be a list, got int (at loop)"),
    ("delegate_to elsewhere", PLAY + "  tasks:\n    - command: 'true'\n      delegate_to: '{{ there }}'\n",
     ("-e", "there=db1"), 4, "pb.yml:4:7: delegate_to supports only localhost, not 'db1' (at delegate_to)"),
    ("command of no words", PLAY + "  tasks:\n    - command: {cmd: ' '}\n", (), 4,
     "pb.yml:3:16: command cmd ' ' has no words: there is no program to run (at command)"),
    ("command of no words after templating", PLAY + "  tasks:\n    - command: '{{ e }} '\n      vars: {e: ''}\n",
     (), 4, "pb.yml:3:7: command cmd ' ' has no words"),
    ("command's program empty", PLAY + "  tasks:\n    - command: {argv: ['']}\n", (), 4,
     "pb.yml:3:16: command's program (its first word) is empty (at command)"),
    ("failed_when }}", PLAY + "  tasks:\n    - shell: echo\n      failed_when: '}}'\n", ("check",), 4,
     "pb.yml:4:7: template syntax error: unexpected '}'"),
    ("verify without checks", PLAY + "  tasks:\n    - verify: {}\n", ("check",), 4,
     "pb.yml:3:15: verify needs at least one check"),
    ("kill_old without target", PLAY + "  tasks:\n    - kill_old: {grace: 1}\n", ("check",), 4,
     "expected with 'pidfile' or with 'pattern' (at [0].tasks[0].kill_old)"),
    ("kill_old with an empty pidfile", PLAY + "  tasks:\n    - kill_old: {pidfile: '', grace: 1}\n", ("check",), 4,
     "'' should be non-empty (at [0].tasks[0].kill_old.pidfile)"),
])
def test_bad_input_is_one_line_and_touches_nothing(tmp_path: Path, trap: Trap, name: str, playbook: str,
                                                  args: tuple[str, ...], rc: int, message: str) -> None:
    command, options = (args[0], args[1:]) if args[:1] == ("check",) else ("play", args)
    res = run_bad(tmp_path, trap, playbook, command, *options)
    assert res.rc == rc, res.err
    assert message in res.err, res.err


def alias_bomb(levels: int = 9) -> str:
    lines = ['    l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return PLAY + "  vars:\n" + "\n".join(lines) + "\n  tasks:" + VALID_TASKS


def test_alias_bomb_is_refused_at_once(tmp_path: Path, trap: Trap) -> None:
    for command in ("check", "play"):
        res = run_bad(tmp_path, trap, alias_bomb(), command)
        assert "YAML aliases expand to more than 200000 values" in res.err


def test_broken_template_in_inventory_is_caught_by_check(tmp_path: Path, trap: Trap) -> None:
    inv = f"all:\n  hosts:\n    h1:\n      connection: ssh\n      port: {trap.port}\n      v: '{{{{ x'\n"
    res = run_bad(tmp_path, trap, PLAY + "  tasks:" + VALID_TASKS, "check", inventory=inv)
    assert "inv.yml:3:5: template syntax error" in res.err and "in variable 'v' of host h1" in res.err


def test_peer_that_closes_at_once_is_unreachable_without_traceback(tmp_path: Path, trap: Trap) -> None:
    """Run in a child process: paramiko's thread would print to the real stderr."""
    inv = trap_inventory(tmp_path / "inv.yml", trap)
    pb = tmp_path / "pb.yml"
    pb.write_text(PLAY + "  tasks:\n    - shell: echo hi\n")
    res = cli_subprocess("play", str(pb), "-i", str(inv), cwd=tmp_path)
    assert res.rc == 3, res.out + res.err
    assert "UNREACHABLE!" in res.out
    assert "Traceback" not in res.err + res.out
    assert res.err == ""


# -- fuzzing -------------------------------------------------------------------------------
TEXT = st.lists(st.sampled_from([*"ab{}[]%#'\"=:, -@\\\n|&*!?", "{{", "}}", "{%", "%}"]), max_size=12).map("".join)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False), TEXT)
JUNK = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)
NOT_A_MAPPING = st.one_of(st.booleans(), st.integers(), TEXT.filter(bool), st.lists(SCALARS, min_size=1))
NOT_A_NUMBER = st.one_of(st.booleans(), st.lists(SCALARS, min_size=1), st.dictionaries(TEXT, SCALARS, min_size=1),
                         st.sampled_from(["abc", "1.5.1", "nan", "inf", "ten", "1,5", "0x10"]))
PLAIN = st.lists(st.sampled_from([*"ab[]'\"=:, -@\\\n|&*!?"]), max_size=12).map("".join)  # cannot close a tag
BROKEN_TEMPLATE = st.tuples(PLAIN, st.sampled_from(["{{", "}}x{{", "{{ (", "{% if %}", "{{ a ==", "{{ ] }}"]),
                            PLAIN).map("".join)
UNDEFINED = st.from_regex(r"\Aundefined_[a-z]{1,8}\Z").map(lambda n: "{{ " + n + " }}")


def _task(defect: dict[str, object] | None = None) -> dict[str, object]:
    task: dict[str, object] = {"name": "t", "kill_old": {"pidfile": "/nonexistent/x.pid", "grace": 3}}
    task.update(defect or {})
    return task


@st.composite
def malformed_playbooks(draw: st.DrawFn) -> str:
    """A playbook with at least one defect that must be refused, amid valid tasks that would connect."""
    play: dict[str, object] = {"hosts": "all", "tasks": [{"shell": "echo would connect"}, _task()]}
    kind = draw(st.sampled_from(["play vars", "play tags", "hosts", "timeout", "when", "failed_when",
                                 "unknown key", "grace", "undefined", "template", "nesting", "module args"]))
    if kind == "play vars":
        play["vars"] = draw(NOT_A_MAPPING)
    elif kind == "play tags":
        play["tags"] = draw(st.one_of(st.integers(), st.booleans(), st.dictionaries(TEXT, SCALARS, min_size=1)))
    elif kind == "hosts":
        play["hosts"] = draw(st.one_of(st.integers(), st.booleans(), st.dictionaries(TEXT, SCALARS)))
    elif kind == "timeout":
        play["tasks"] = [_task({"timeout": draw(NOT_A_NUMBER)})]
    elif kind == "when":
        play["tasks"] = [_task({"when": draw(st.dictionaries(TEXT, JUNK, min_size=1))})]
    elif kind == "failed_when":
        play["tasks"] = [_task({"failed_when": draw(BROKEN_TEMPLATE)})]
    elif kind == "unknown key":
        play["tasks"] = [_task({draw(st.from_regex(r"\Azz[a-z_]{0,8}\Z")): draw(JUNK)})]
    elif kind == "grace":
        play["tasks"] = [_task({"kill_old": {"pidfile": "/x.pid", "grace": draw(NOT_A_NUMBER)}})]
    elif kind == "undefined":
        play["tasks"] = [_task({"kill_old": {"pidfile": draw(UNDEFINED)}})]
    elif kind == "template":
        play["tasks"] = [_task({"name": draw(BROKEN_TEMPLATE)})]
    elif kind == "module args":
        play["tasks"] = [_task({"kill_old": draw(NOT_A_MAPPING)})]
    else:
        depth = draw(st.integers(65, 400))
        return PLAY + "  vars:\n    x: " + "[" * depth + "]" * depth + "\n  tasks:" + VALID_TASKS
    return yaml.safe_dump([play], sort_keys=False)


@st.composite
def malformed_inventories(draw: st.DrawFn, port: int) -> str:
    host: dict[str, object] = {"connection": "ssh", "host": "127.0.0.1", "port": port}
    kind = draw(st.sampled_from(["host vars", "template", "port", "connection", "group", "hosts"]))
    data: dict[str, object] = {"all": {"hosts": {"h1": host}}}
    if kind == "host vars":
        not_vars = st.one_of(st.integers(), st.lists(SCALARS, min_size=1), TEXT.filter(bool))
        data["all"] = {"hosts": {"h1": draw(not_vars)}}
    elif kind == "template":
        host[draw(st.from_regex(r"\Av[a-z]{0,5}\Z"))] = draw(BROKEN_TEMPLATE)
    elif kind == "port":
        host["port"] = draw(st.sampled_from(["abc", "{{ nope }}", "22x", "[1]"]))
    elif kind == "connection":
        host["connection"] = draw(st.sampled_from(["telnet", "{{ undefined_c }}", "sshh"]))
    elif kind == "group":
        data["all"] = {"hosts": {"h1": host}, "children": draw(st.one_of(st.integers(), st.lists(SCALARS, min_size=1)))}
    else:
        data["all"] = {"hosts": draw(st.one_of(st.integers(), st.lists(TEXT, min_size=1)))}
    return yaml.safe_dump(data, sort_keys=False)


MALFORMED_E = st.one_of(
    st.tuples(st.just('k="'), TEXT.filter(lambda t: '"' not in t)).map("".join),  # unbalanced quote
    st.from_regex(r"\A[a-z]{1,8}\Z"),  # a word without =
    st.tuples(st.just("{"), st.sampled_from(["[", "a: [", "{{", "a: b: c", "]"])).map("".join),
    st.tuples(st.just("["), TEXT).map("".join),  # a list is not a mapping
    st.tuples(st.just("@/nonexistent/"), st.from_regex(r"\A[a-z]{1,8}\Z")).map("".join),
    st.tuples(st.just("grace="), NOT_A_NUMBER.filter(lambda v: isinstance(v, str))).map("".join),
)
FUZZ = settings(max_examples=30, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(playbook=malformed_playbooks(), command=st.sampled_from(["play", "check"]))
def test_fuzz_malformed_playbooks(tmp_path: Path, trap: Trap, playbook: str, command: str) -> None:
    run_bad(tmp_path, trap, playbook, command)


@FUZZ
@given(data=st.data(), command=st.sampled_from(["play", "check"]))
def test_fuzz_malformed_inventories(tmp_path: Path, trap: Trap, data: st.DataObject, command: str) -> None:
    inventory = data.draw(malformed_inventories(trap.port))
    run_bad(tmp_path, trap, PLAY + "  tasks:" + VALID_TASKS, command, inventory=inventory)


@FUZZ
@given(value=MALFORMED_E)
def test_fuzz_malformed_extra_vars(tmp_path: Path, trap: Trap, value: str) -> None:
    playbook = PLAY + "  tasks:\n    - shell: echo would connect\n" \
        "    - kill_old: {pidfile: /x.pid, grace: '{{ grace }}'}\n"
    run_bad(tmp_path, trap, playbook, "play", "-e", value)

