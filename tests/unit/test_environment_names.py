"""An `environment:` whose key is no environment variable name (`BAD-NAME`, `1X`, `A B`, ''),
or that is no mapping, was refused only when its task ran: exit 2, after the tasks before it had
changed the hosts. Now it is bad input, told with FILE:LINE:COL and the key under `check` and
`play`, exit 4, and the play's first task, which would create a marker file, never runs: as
written at load (play, block, include, task), rendered per host in preflight
(`environment: "{{ train_env }}"`). A secret typed into a key, or into a list given instead of
a mapping, is shown masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli
from tests.unit.test_validation_gaps import COMMANDS, INVENTORY

TOKEN = "tok_abc123xyz"
#: The play's first task touches the host: the marker exists if anything ran.
FIRST = "    - shell: touch {marker}\n"
HEAD = "- hosts: all\n  gather_facts: false\n"
NOT_A_NAME = "is not a name (letters, digits and _, not starting with a digit)"

CASES = {  # the playbook, and every ERROR line expected (FILE is pb.yml)
    "task keys": (
        HEAD + "  tasks:\n" + FIRST + "    - shell: echo hi\n      environment:\n        BAD-NAME: x\n"
        "        1X: y\n        'A B': z\n        '': e\n        GOOD: g\n",
        [f"7:9: environment variable name 'BAD-NAME' {NOT_A_NAME} (at [0].tasks[1].environment.BAD-NAME)",
         f"8:9: environment variable name '1X' {NOT_A_NAME} (at [0].tasks[1].environment.1X)",
         f"9:9: environment variable name 'A B' {NOT_A_NAME} (at [0].tasks[1].environment.A B)",
         f"10:9: environment variable name '' {NOT_A_NAME} (at [0].tasks[1].environment.)"]),
    "play key": (
        HEAD + "  environment: {BAD-NAME: x}\n  tasks:\n" + FIRST,
        [f"3:17: environment variable name 'BAD-NAME' {NOT_A_NAME} (at [0].environment.BAD-NAME)"]),
    "block key": (
        HEAD + "  tasks:\n" + FIRST + "    - block:\n        - shell: echo hi\n      environment: {1X: y}\n",
        [f"7:21: environment variable name '1X' {NOT_A_NAME} (at [0].tasks[1].environment.1X)"]),
    "include key": (
        HEAD + "  tasks:\n" + FIRST + "    - import_tasks: more.yml\n      environment: {A.B: y}\n",
        [f"6:21: environment variable name 'A.B' {NOT_A_NAME} (at [0].tasks[1].environment.A.B)"]),
    "templated key": (
        HEAD + "  vars: {name: GOOD}\n  tasks:\n" + FIRST + "    - shell: echo hi\n"
        "      environment: {'{{ name }}': x}\n",
        [f"7:21: environment variable name '{{{{ name }}}}' {NOT_A_NAME}; a key is not templated, only values are "
         "(at [0].tasks[1].environment.{{ name }})"]),
    "secret typed into a key": (
        HEAD + "  tasks:\n" + FIRST + f"    - shell: echo hi\n      environment: {{HF_TOKEN:{TOKEN}}}\n",
        [f"6:21: environment variable name 'HF_TOKEN:********' {NOT_A_NAME} "
         "(at [0].tasks[1].environment.HF_TOKEN:********)"]),
    "a string": (
        HEAD + "  tasks:\n" + FIRST + "    - shell: echo hi\n      environment: A=1\n",
        ["6:7: environment must be a mapping, got str (at [0].tasks[1].environment)"]),
    "a list with a secret": (
        HEAD + "  tasks:\n" + FIRST + f"    - shell: echo hi\n      environment: [HF_TOKEN={TOKEN}]\n",
        ["6:7: ['HF_TOKEN=********'] is not valid here: expected object or string (at [0].tasks[1].environment)"]),
    "rendered keys": (
        HEAD + "  vars: {envs: {GOOD: g, 1X: y}}\n  tasks:\n" + FIRST + "    - shell: echo hi\n"
        "      environment: '{{ envs }}'\n",
        [f"7:7: environment variable name '1X' {NOT_A_NAME} (at environment)"]),
    "rendered secret typed into a key": (
        HEAD + f"  vars: {{slip: {{HF_TOKEN:{TOKEN}}}}}\n  tasks:\n" + FIRST + "    - block:\n"
        "        - shell: echo hi\n      environment: '{{ slip }}'\n",
        [f"7:11: environment variable name 'HF_TOKEN:********' {NOT_A_NAME} (at environment)"]),
    "rendered no mapping": (
        HEAD + "  vars: {envs: [A=1]}\n  tasks:\n" + FIRST + "    - shell: echo hi\n"
        "      environment: '{{ envs }}'\n",
        ["7:7: environment must be a mapping, got list (at environment)"]),
}


def _run(tmp_path: Path, command: str, playbook: str) -> tuple[int, str, Path]:
    marker = tmp_path / "touched"
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "more.yml").write_text("- shell: echo more\n")
    (tmp_path / "pb.yml").write_text(playbook.replace("{marker}", str(marker)))
    res = cli(command, str(tmp_path / "pb.yml"), "-i", str(tmp_path / "inv.yml"), cwd=tmp_path)
    assert "Traceback" not in res.out + res.err
    return res.rc, res.out + res.err, marker


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_environment_is_refused_before_any_host_is_touched(tmp_path: Path, command: str, name: str) -> None:
    playbook, expected = CASES[name]
    rc, output, marker = _run(tmp_path, command, playbook)
    errors = [line for line in output.splitlines() if line.startswith("ERROR:")]
    assert errors == [f"ERROR: {tmp_path / 'pb.yml'}:{line}" for line in expected], output
    assert rc == 4
    assert not marker.exists()
    assert TOKEN not in output


def test_an_environment_known_only_as_the_run_goes_is_left_to_the_run(tmp_path: Path) -> None:
    """An environment that reads a value set as the run goes (set_fact, register) is rendered
    on the host, as before: a good one runs, a bad one fails its task there (exit 2), after the
    tasks before it."""
    good = (HEAD + "  tasks:\n" + FIRST + "    - set_fact: {envs: {B: '2'}}\n    - shell: test \"$B\" = 2\n"
            "      environment: '{{ envs }}'\n")
    rc, output, marker = _run(tmp_path, "play", good)
    assert rc == 0 and marker.exists(), output
    marker.unlink()
    bad = HEAD + "  tasks:\n" + FIRST + "    - set_fact: {envs: {1X: y}}\n    - shell: echo hi\n" \
        "      environment: '{{ envs }}'\n"
    rc, output, marker = _run(tmp_path, "play", bad)
    assert rc == 2 and marker.exists(), output
    assert f"pb.yml:7:7: environment variable name '1X' {NOT_A_NAME} (at environment)" in output, output


def test_an_empty_environment_is_no_environment(tmp_path: Path) -> None:
    """`environment: ""` (a task's, a block's) is skipped by Ansible and by the run, but load
    refused it (exit 4: `environment must be a mapping, got str`). It runs again, with no
    variable added; `check` passes it."""
    playbook = (HEAD + "  tasks:\n    - block:\n        - shell: test -z \"${EMPTY_ENV_MARK+set}\" && touch {marker}\n"
                "          environment: ''\n      environment: \"\"\n")
    rc, output, marker = _run(tmp_path, "check", playbook)
    assert rc == 0 and not marker.exists(), output
    rc, output, marker = _run(tmp_path, "play", playbook)
    assert rc == 0 and marker.exists(), output
