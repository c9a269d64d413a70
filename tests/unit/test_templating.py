from __future__ import annotations

import shlex

import pytest

from opsrunner.errors import TemplateError
from opsrunner.templating import LazyVars, check_syntax, evaluate, render, template_value, truthy


def test_lazy_nested_vars_and_native_types() -> None:
    v = LazyVars([{"a": "{{ b }}/x", "b": "{{ c | upper }}", "c": "q", "l": [1, 2], "n": "{{ l }}"}])
    assert v["a"] == "Q/x"
    assert v["n"] == [1, 2]
    assert render("{{ l | length + 1 }}", v) == 3


def test_unrelated_undefined_var_is_no_error_but_used_one_is() -> None:
    v = LazyVars([{"broken": "{{ nope }}", "fine": "ok"}])
    assert render("{{ fine }}", v) == "ok"
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render("{{ broken }}", v)


def test_a_var_whose_template_is_undefined_is_undefined_to_default_and_defined() -> None:
    """As ansible-core's lazy templating: `default()` and `is defined` see through a variable
    whose own value reads an undefined one (at any depth); using it names the missing one."""
    v = LazyVars([{"ref": "{{ missing }}", "chain": "{{ ref }}", "ok": "{{ 1 + 1 }}"}])
    assert render("{{ ref | default('d') }}", v) == "d"
    assert render("{{ chain | default('c') }}", v) == "c"
    assert evaluate("ref is defined", v) is False and evaluate("chain is undefined", v) is True
    assert render("{{ ok | default('unused') }}", v) == 2
    with pytest.raises(TemplateError, match="'missing' is undefined"):
        render("{{ chain }}", v)
    with pytest.raises(TemplateError, match="'missing' is undefined"):
        v["ref"]  # read directly (a host var the engine reads): the error, not an Undefined


def test_self_reference_is_reported() -> None:
    v = LazyVars([{"a": "{{ a }}"}])
    with pytest.raises(TemplateError, match="refers to itself"):
        render("{{ a }}", v)


@pytest.mark.parametrize("value", ["plain", "it's", "a b; rm -rf /", "$(x)`y`", "ünï\ncode", ""])
def test_quote_filter_round_trips_through_a_shell(value: str) -> None:
    quoted = render("{{ v | quote }}", LazyVars([{"v": value}]))
    assert shlex.split(f"echo {quoted}")[1:] == [value]


def test_quote_filter_on_lists() -> None:
    assert render("{{ v | quote }}", LazyVars([{"v": ["a b", "c"]}])) == "'a b' c"


def test_sandbox_blocks_attribute_escape() -> None:
    with pytest.raises(TemplateError):
        render("{{ ''.__class__.__mro__[1].__subclasses__() }}", LazyVars([{}]))


def test_when_expressions() -> None:
    v = LazyVars([{"r": {"rc": 1, "stdout": "x"}, "flag": "yes"}])
    assert truthy("r.rc == 1", v)
    assert truthy("{{ r.rc == 1 }}", v)
    assert not truthy(["r.rc == 1", "r.stdout == 'y'"], v)
    assert truthy("flag | bool", v)
    assert evaluate("r.stdout ~ '!'", v) == "x!"


def test_omit_drops_keys() -> None:
    v = LazyVars([{"empty": ""}])
    assert template_value({"a": "{{ empty or omit }}", "b": 1}, v) == {"b": 1}


def test_syntax_check() -> None:
    assert check_syntax("{{ ok }}") is None
    assert "syntax error" in (check_syntax("{{ bad") or "")
    assert check_syntax("no template at all {") is None


def test_unsafe_text_is_never_rendered_even_through_variables() -> None:
    from opsrunner.templating import LazyVars, UnsafeText, mark_unsafe, render, template_value

    data = mark_unsafe({"stdout": "{{ 1 + 1 }}", "lines": ["{% if true %}x{% endif %}"], "rc": 0})
    assert isinstance(data["lines"][0], UnsafeText) and data["rc"] == 0
    variables = LazyVars([{"r": data, "copy": "{{ r.stdout }}", "joined": "{{ r.stdout ~ '!' }}"}])
    assert render("{{ r.stdout }}", variables) == "{{ 1 + 1 }}"
    assert variables["copy"] == "{{ 1 + 1 }}"
    assert variables["joined"] == "{{ 1 + 1 }}!"  # rendered once, never again
    assert template_value(data, variables) == data
