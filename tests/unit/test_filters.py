"""Ansible's filters and tests; expected values are what ansible-core 2.19 printed for the same
expression (`debug: msg="{{ (EXPR) | to_json }}"`, run side by side)."""

from __future__ import annotations

import pytest

from opsrunner.errors import TemplateError
from opsrunner.templating import LazyVars, render, template_value, truthy

VARS = {"d": {"a": 1, "b": {"c": 2}}, "s": "hello world 123", "lst": [1, [2, [3, [4]]], None]}

ANSIBLE_2_19 = [
    (r"s | regex_replace('(\w+) (\w+)', '\2 \1')", "world hello 123"),
    (r"s | regex_replace('L', 'x', ignorecase=true)", "hexxo worxd 123"),
    (r"s | regex_search('\d+')", "123"),
    (r"s | regex_search('(\w+) (\w+)', '\2', '\1')", ["world", "hello"]),
    (r"s | regex_search('(?P<w>\w+)', '\g<w>')", ["hello"]),
    ("s | regex_search('zzz')", None),
    ("true | ternary('y','n')", "y"),
    ("none | ternary('y','n','nul')", "nul"),
    ("'' | ternary('y','n')", "n"),
    ("d | to_json", '{"a": 1, "b": {"c": 2}}'),
    ("d | to_json(indent=1)", '{\n "a": 1,\n "b": {\n  "c": 2\n }\n}'),
    ("{'a': 'é'} | to_json", '{"a": "\\u00e9"}'),
    ("d | to_nice_json", '{\n    "a": 1,\n    "b": {\n        "c": 2\n    }\n}'),
    ("d | to_yaml", "a: 1\nb: {c: 2}\n"),
    # as ansible-core 2.19 printed them: block style, 4 wide, keys sorted, unicode kept
    ("{'b': [1, {'x': 'y'}], 'a': 'ünï', 'c': none, 'e': true} | to_nice_yaml",
     "a: ünï\nb:\n- 1\n-   x: y\nc: null\ne: true\n"),
    ("{'b': [1, {'x': 'y'}], 'a': 'ünï'} | to_nice_yaml(indent=2)", "a: ünï\nb:\n- 1\n- x: y\n"),
    ("'{\"x\": [1,2]}' | from_json", {"x": [1, 2]}),
    ("'x: [1, 2]' | from_yaml", {"x": [1, 2]}),
    ("d | combine({'b': {'e': 3}})", {"a": 1, "b": {"e": 3}}),
    ("d | combine({'b': {'e': 3}}, recursive=true)", {"a": 1, "b": {"c": 2, "e": 3}}),
    ("d | combine({'b': 1}, {'c': 3})", {"a": 1, "b": 1, "c": 3}),
    ("d | dict2items", [{"key": "a", "value": 1}, {"key": "b", "value": {"c": 2}}]),
    ("d | dict2items(key_name='k', value_name='v')", [{"k": "a", "v": 1}, {"k": "b", "v": {"c": 2}}]),
    ("[{'key':'k','value':1}] | items2dict", {"k": 1}),
    ("'héllo' | b64encode", "aMOpbGxv"),
    ("'aMOpbGxv' | b64decode", "héllo"),
    ("lst | flatten", [1, 2, 3, 4]),
    ("lst | flatten(levels=1)", [1, 2, [3, [4]]]),
    ("lst | flatten(skip_nulls=false)", [1, 2, 3, 4, None]),
    ("'yes' | bool", True), ("'off' | bool", False), ("'banana' | bool", False),
    ("0 | bool", False), ("'True' | bool", True), ("none | bool", False),
    ('"it\'s" | quote', "'it'\"'\"'s'"),
    ("'/a/b/' | basename", ""), ("'/a/b' | basename", "b"),
    ("'/a' | dirname", "/"), ("'/a/b/' | dirname", "/a/b"),
    ("'1.10' is version('1.9', '>')", True),
    ("'2.0' is version('10.0', 'lt')", True),
    ("'1.2.3' is version('1.2.3')", True),
    ("'1.0a' is version('1.0', 'gt')", True),
    ("'abc' is match('b')", False), ("'abc' is search('b')", True),
    ("'ABC' is match('a', ignorecase=true)", True),
    ("{'failed': true} is failed", True), ("{'failed': false} is failure", False),
    ("{'changed': true} is changed", True), ("{'changed': true} is change", True),
    ("{'skipped': true} is skipped", True), ("{'skipped': true} is skip", True),
    ("{'rc': 0} is success", True), ("{'rc': 0} is succeeded", True),
]


@pytest.mark.parametrize(("expr", "expected"), ANSIBLE_2_19, ids=[e for e, _ in ANSIBLE_2_19])
def test_filter_and_test_results_match_ansible(expr: str, expected: object) -> None:
    assert render("{{ " + expr + " }}", LazyVars([VARS])) == expected


@pytest.mark.parametrize(("expr", "message"), [
    ("nope | mandatory", "Mandatory variable 'nope' not defined."),
    ("nope | mandatory('need nope')", "need nope"),
    ("'str' is failed", "The 'failed' test expects a dictionary"),
    ("'x' | regex_replace('x', 'y', mandatory_count=2)", "should match 2 times, but matches 1 times"),
    ("5 | dict2items", "dict2items requires a dictionary"),
    ("'1.0' is version('2', 'about')", "Invalid operator type"),
])
def test_filter_errors_name_the_problem(expr: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render("{{ " + expr + " }}", LazyVars([VARS]))


def test_changed_test_reads_looped_results() -> None:
    v = LazyVars([{"r": {"results": [{"changed": False}, {"changed": True}]}}])
    assert render("{{ r is changed }}", v) is True


def test_default_omit_drops_the_argument() -> None:
    assert template_value({"msg": "{{ nope | default(omit) }}", "x": 1}, LazyVars([{}])) == {"x": 1}


def test_quote_on_a_list_gives_shell_words_a_deliberate_difference() -> None:
    # ansible-core quotes the list's Python repr; opsrunner quotes each item (docs/ansible.md says why).
    assert render("{{ ['a b', 'c'] | quote }}", LazyVars([{}])) == "'a b' c"


@pytest.mark.parametrize(("when", "kind", "value"), [
    ("sv", "str", True), ("iv", "int", True), ("ev", "str", False), ("lv", "list", True),
    ("'abc'", "str", True), ("none", "NoneType", False),
])
def test_non_boolean_conditional_is_an_error_as_in_ansible_2_19(when: str, kind: str, value: bool) -> None:
    v = LazyVars([{"sv": "yes", "iv": 1, "ev": "", "lv": [1]}])
    with pytest.raises(TemplateError, match=rf"Conditional result \({value}\) was derived from value of "
                                            rf"type '{kind}'.*Conditionals must have a boolean result"):
        truthy(when, v)


def test_boolean_conditionals_pass() -> None:
    v = LazyVars([{"sv": "yes", "bv": True}])
    assert truthy("sv | bool", v) is True
    assert truthy("{{ bv }}", v) is True
    assert truthy("sv == 'no'", v) is False
    assert truthy(True, v) is True


def test_literal_expressions_keep_their_type() -> None:
    assert render("{{ [1, 2] }}", LazyVars([{}])) == [1, 2]
    assert render("{{ '[1]' | from_json }}", LazyVars([{}])) == [1]


def _ansible_page_names(start: str, end: str) -> set[str]:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "ansible.md").read_text()
    part = text[text.index(start):text.index(end)]
    part = re.sub(r"\([^)]*\)", "", part)  # argument notes, e.g. (`levels`, `skip_nulls`)
    return {n for n in re.findall(r"`([a-z_0-9]+)", part) if n != "default"}


def test_ansible_users_page_lists_exactly_the_filters_and_tests() -> None:
    from opsrunner.templating.filters import FILTERS
    from opsrunner.templating.tests import TESTS

    assert _ansible_page_names("<!-- ansible-filters -->", "<!-- ansible-tests -->") == set(FILTERS)
    assert _ansible_page_names("<!-- ansible-tests -->", "<!-- end -->") == set(TESTS) - {"version_compare"}


def test_attribute_of_an_undefined_variable_takes_a_default_but_is_strict_otherwise() -> None:
    v = LazyVars([{"d": {}}])
    assert render("{{ nope.name | default('-') }}", v) == "-"
    assert render("{{ d.missing.deeper | default('-') }}", v) == "-"
    assert render("{{ nope.name is defined }}", v) is False
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render("{{ nope.name }}", v)
    with pytest.raises(TemplateError, match="has no attribute 'missing'"):
        render("x{{ d.missing.deeper }}", v)


def test_ansible_users_page_modules_exist_with_a_reference_section() -> None:
    import re
    from pathlib import Path

    from opsrunner.modules.registry import module_names

    docs = Path(__file__).resolve().parents[2] / "docs"
    section = (docs / "ansible.md").read_text()
    reference = (docs / "modules.md").read_text()
    bullet = section[section.index("- Modules beside the restart ones:"):]
    bullet = bullet[:bullet.index("\n- ")]
    named = {n for n in re.findall(r"`([a-z_]+)`", bullet) if not n.startswith(("state", "path", "port"))}
    mentioned = named & {"template", "copy", "file", "stat", "lineinfile", "wait_for"}
    assert mentioned == {"template", "copy", "file", "stat", "lineinfile", "wait_for"}
    for name in mentioned:
        assert name in module_names()
        assert f"### `{name}`" in reference  # the generated reference documents it
