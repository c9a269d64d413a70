"""libyaml's parser (yamlsource.FAST_LOADER) must load exactly what the pure-Python one does,
with the same positions: the shipped YAML files, every YAML text the tests write, and
generated documents (a tab after `key:` aside, see _same). A document libyaml rejects gets the
pure-Python parser's message."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from opsrunner import yamlsource
from opsrunner.errors import ValidationError
from opsrunner.yamlsource import PosDict, PosList

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(yamlsource.FAST_LOADER is None, reason="PyYAML without libyaml")


def _pure(text: str) -> Any:
    fast, yamlsource.FAST_LOADER = yamlsource.FAST_LOADER, None
    try:
        return yamlsource.load_yaml_text(text, "doc.yml")
    finally:
        yamlsource.FAST_LOADER = fast


def _shape(value: Any) -> Any:
    """The value with every position it carries, and its exact types (bool vs int, str subclasses)."""
    if isinstance(value, PosDict):
        return ("map", value.pos, [(k, value.at(k), _shape(v)) for k, v in value.items()])
    if isinstance(value, PosList):
        return ("seq", value.pos, [(value.at(i), _shape(v)) for i, v in enumerate(value)])
    return (type(value).__name__, repr(value))


def _outcome(load: Any, text: str) -> Any:
    try:
        return _shape(load(text))
    except ValidationError as exc:
        return ("error", [str(p) for p in exc.problems])


def _same(text: str) -> bool:
    """True when both load it alike. They differ on one thing only: a tab after `key:`, which
    libyaml takes as the separator it is (YAML 1.1 and 1.2; ansible-core, on libyaml, loads
    `w:<tab>1` as w=1) and the pure-Python scanner refuses."""
    fast, pure = _outcome(lambda t: yamlsource.load_yaml_text(t, "doc.yml"), text), _outcome(_pure, text)
    if fast != pure:
        assert pure[0] == "error" and "\t" in text, (text, fast, pure)
        assert "found character '\\t' that cannot start any token" in pure[1][0], pure
        return False
    return True


def _texts_in_tests() -> list[str]:
    """YAML the tests write: triple-quoted strings that start like a playbook or an inventory."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for match in re.finditer(r'"""\n(- hosts:.*?|all:.*?)"""', path.read_text(), re.S):
            if "{" not in match.group(1) or "{{" in match.group(1):  # f-string holes would not be YAML
                found.append(match.group(1))
    return found


SHIPPED = sorted(p for p in ROOT.glob("*/**/*.y*ml") if not any(x in p.parts for x in (".venv", "node_modules")))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_yaml_loads_the_same(path: Path) -> None:
    assert _same(path.read_text())


def test_yaml_written_by_the_tests_loads_the_same() -> None:
    texts = _texts_in_tests()
    assert len(texts) > 50
    for text in texts:
        assert _same(text)


PIECES = ["a", "b: 1", "- x", "- {k: v}", "  - y", "c: [1, 2.5, 'q', \"d\\n\"]", "d: !secret s3", "e: &x {f: 1}",
          "g: *x", "h: |\n  line\n  two", "i: >-\n  fold\n  ed", "j: yes", "k: 0o17", "l: ~", "m: 2024-01-02",
          "n: 'it''s'", "o: {p: [q, {r: s}]}", "? complex\n: key", "t: u: v", "w:\t1", "x: \"\\u00e9\"", "# c",
          "y: -", "z: [", "aa: @b", "bb: 1\nbb: 2", "- - nested", "cc:\n  - 1\n  -  2", "dd: \"unterminated"]


@pytest.mark.parametrize("seed", range(3))
def test_generated_documents_load_the_same_or_fail_the_same(seed: int) -> None:
    rng = random.Random(seed)
    alike = 0
    for _ in range(400):
        lines = [rng.choice(PIECES) for _ in range(rng.randrange(1, 6))]
        indent = rng.choice(["", "  "])
        alike += _same("\n".join(indent + line if i and rng.random() < 0.3 else line
                                 for i, line in enumerate(lines)) + "\n")
    assert alike > 300


def test_a_tab_after_a_colon_loads_as_in_ansible_core() -> None:
    assert yamlsource.load_yaml_text("w:\t1\n", "doc.yml") == {"w": 1}


def test_a_syntax_error_keeps_the_pure_python_message() -> None:
    with pytest.raises(ValidationError) as exc:
        yamlsource.load_yaml_text("a: b: c\n", "doc.yml")
    assert str(exc.value.problems[0]) == "doc.yml:1:5: YAML syntax error: mapping values are not allowed here"


def test_text_that_is_not_utf8_gets_the_pure_python_error() -> None:
    # A non-UTF-8 byte in `-e` arrives as a lone surrogate: libyaml cannot even encode it.
    text = '{"k": "\udcff"}'
    with pytest.raises(ValidationError) as fast:
        yamlsource.load_yaml_text(text, "doc.yml")
    assert _outcome(_pure, text) == ("error", [str(p) for p in fast.value.problems])
    assert "unacceptable character #xdcff" in str(fast.value.problems[0])
