"""A quoted string left open is reported where its quote opened, not only at the end of the
file where PyYAML runs out of input; other syntax errors keep PyYAML's position."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsrunner.errors import ValidationError
from opsrunner.yamlsource import load_yaml_text
from tests.helpers import cli

PLAYBOOK = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: a
      debug:
        msg: hi
    - name: "broken
      debug: {msg: x}
"""


def test_check_names_the_line_the_quote_opened_on(tmp_path: Path) -> None:
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h: {connection: local}\n")
    res = cli("check", "play.yml", "-i", "inv.yml", cwd=tmp_path)
    assert res.rc == 4
    assert "play.yml:7:13: YAML syntax error: unterminated quoted string opened here " \
           "(found the end of the file at 9:1)" in res.err, res.err


@pytest.mark.parametrize(("text", "where"), [("a: 'x\nb: 1\n", "f.yml:1:4"), ('- "x', "f.yml:1:3")])
def test_single_and_double_quotes_without_a_final_newline(text: str, where: str) -> None:
    with pytest.raises(ValidationError) as raised:
        load_yaml_text(text, "f.yml")
    [problem] = raised.value.problems
    assert str(problem).startswith(f"{where}: YAML syntax error: unterminated quoted string opened here "), problem


def test_other_syntax_errors_keep_their_position() -> None:
    with pytest.raises(ValidationError) as raised:
        load_yaml_text("- hosts: all\n  tasks: [\n", "f.yml")
    [problem] = raised.value.problems
    assert str(problem) == "f.yml:3:1: YAML syntax error: expected the node content, but found '<stream end>'"
