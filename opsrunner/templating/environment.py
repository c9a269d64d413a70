"""Jinja2 templating: sandboxed, StrictUndefined, lazy variables, native single expressions.

A string that is exactly one `{{ expr }}` evaluates to the expression's native value
(a list stays a list); anything else renders to a string, its None parts left out (_concat). Variables are resolved
lazily, so a var may refer to other vars, and an unrelated undefined var is no error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import Frame
from jinja2.lexer import TOKEN_STRING, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END, Lexer
from jinja2.nativetypes import NativeCodeGenerator
from jinja2.sandbox import ImmutableSandboxedEnvironment

from opsrunner.errors import TemplateError, UndefinedVariable
from opsrunner.templating.filters import FILTERS
from opsrunner.templating.tests import TESTS


class _Lexer(Lexer):
    """Backslashes in string constants inside `{{ }}` stay literal, as in ansible-core: YAML has
    already processed them once, so `regex_replace('(a)', '\\1')` keeps its back-reference."""

    def tokeniter(self, *args: Any, **kwargs: Any) -> Iterator[tuple[int, str, str]]:
        in_variable = False
        for lineno, kind, value in super().tokeniter(*args, **kwargs):
            if kind == TOKEN_VARIABLE_BEGIN:
                in_variable = True
            elif kind == TOKEN_VARIABLE_END:
                in_variable = False
            elif in_variable and kind == TOKEN_STRING:
                value = value.replace("\\", "\\\\")
            yield lineno, kind, value


class _Undefined(jinja2.ChainableUndefined, jinja2.StrictUndefined):
    """Strict when used, but `a.b.c | default(x)` works when `a` is undefined, as in ansible-core."""

    __slots__ = ()


class _CodeGenerator(NativeCodeGenerator):
    """No compile-time folding of expressions: a folded constant is emitted as its text, so
    `{{ [1, 2] }}` or `{{ '[1]' | from_json }}` would lose its type."""

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> Any:
        if not isinstance(node, nodes.TemplateData):
            raise nodes.Impossible()
        return super()._output_child_to_const(node, frame, finalize)


class _Env(ImmutableSandboxedEnvironment):
    code_generator_class = _CodeGenerator

    @property
    def lexer(self) -> Lexer:
        lexer: Lexer | None = self.__dict__.get("_opsrunner_lexer")
        if lexer is None:
            lexer = self.__dict__["_opsrunner_lexer"] = _Lexer(self)
        return lexer


def _make_env() -> _Env:
    env = _Env(undefined=_Undefined, keep_trailing_newline=True, autoescape=False)
    env.filters.update(FILTERS)
    env.tests.update(TESTS)
    return env


OMIT = "__opsrunner_omit_7f3a__"


def _lookup(kind: str, *terms: str, default: Any = None) -> Any:
    """Controller-side lookups: env (an environment variable) and file (a file's text)."""
    import os
    from pathlib import Path

    if kind == "env":
        values = [os.environ.get(t, "" if default is None else default) for t in terms]
    elif kind == "file":
        values = [Path(t).expanduser().read_text("utf-8").rstrip("\n") for t in terms]
    else:
        raise ValueError(f"unknown lookup {kind!r} (supported: env, file)")
    values = mark_unsafe(values)  # like Ansible: what a lookup returns is data, not a template
    return values[0] if len(values) == 1 else values


ENV = _make_env()
ENV.globals["lookup"] = _lookup
ENV.globals["omit"] = OMIT


class UnsafeText(str):
    """Text that came from a host (output, messages, file contents, registered results): data,
    never rendered as a template (Ansible's "unsafe" marking)."""

    __slots__ = ()


def mark_unsafe(value: Any) -> Any:
    """A copy of a nested value with every string marked as UnsafeText."""
    if isinstance(value, str):
        return value if isinstance(value, UnsafeText) else UnsafeText(value)
    if isinstance(value, dict):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mark_unsafe(v) for v in value]
    return value


def is_template(value: str) -> bool:
    if isinstance(value, UnsafeText):
        return False
    return "{{" in value or "{%" in value or "{#" in value


@lru_cache(maxsize=4096)
def _compile(source: str) -> jinja2.Template:
    return ENV.from_string(source)


def check_syntax(source: str) -> str | None:
    """Return a syntax error message for a template string, or None if it parses."""
    if not is_template(source):
        return None
    try:
        _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        return f"template syntax error: {exc.message}"
    return None


def _concat(parts: Iterator[Any]) -> Any:
    """ansible-core 2.19's: a template that is one expression gives its value, None included;
    otherwise None parts are left out (`a{{ none }}b` is `ab`, not `aNoneb`), one part left keeps
    its type, more are joined as text. A template that outputs nothing at all stays ''."""
    items = list(parts)
    for item in items:
        if isinstance(item, jinja2.Undefined):
            str(item)  # StrictUndefined raises UndefinedError naming the variable
    if len(items) == 1:
        return items[0]
    kept = [i for i in items if i is not None]
    if len(kept) == 1 or (items and not kept):
        return kept[0] if kept else None
    return "".join(str(i) for i in kept)


class LazyVars(Mapping[str, Any]):
    """Variables in layers (lowest first); values are templated when first read."""

    def __init__(self, layers: list[Mapping[str, Any]]) -> None:
        self._raw: dict[str, Any] = {}
        for layer in layers:
            self._raw.update(layer)
        #: Kept to tell where a variable was set (layer_of); only read when a problem is told.
        self._layers = layers
        self._cache: dict[str, Any] = {}
        self._resolving: set[str] = set()

    def child(self, *layers: Mapping[str, Any]) -> LazyVars:
        child = LazyVars([self._raw, *layers])
        child._layers = [*self._layers, *layers]
        return child

    def layer_of(self, key: str) -> Mapping[str, Any] | None:
        """The layer whose value of `key` is used (the highest that sets it); None if none does."""
        return next((layer for layer in reversed(self._layers) if key in layer), None)

    def raw(self) -> dict[str, Any]:
        return self._raw

    def __getitem__(self, key: str) -> Any:
        if key in self._cache:
            return self._cache[key]
        if key not in self._raw:
            if key in ENV.globals:
                return ENV.globals[key]
            raise KeyError(key)
        if key in self._resolving:
            raise TemplateError(f"variable '{key}' refers to itself")
        self._resolving.add(key)
        try:
            value = template_value(self._raw[key], self)
        finally:
            self._resolving.discard(key)
        self._cache[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._raw or key in ENV.globals

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class _Seen(Mapping[str, Any]):
    """The variables as a template reads them: one whose own template reads an undefined
    variable is undefined itself (so `default()` and `is defined` apply to it, as in
    ansible-core), where reading it directly is the error that names the missing one."""

    __slots__ = ("_variables",)

    def __init__(self, variables: LazyVars) -> None:
        self._variables = variables

    def __getitem__(self, key: str) -> Any:
        try:
            return self._variables[key]
        except UndefinedVariable as exc:
            return _Undefined(hint=exc.hint, name=key)

    def __contains__(self, key: object) -> bool:
        return key in self._variables

    def __iter__(self) -> Iterator[str]:
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)


def as_read(variables: Mapping[str, Any]) -> Mapping[str, Any]:
    """The variables as a template's context reads them (_Seen)."""
    return _Seen(variables) if isinstance(variables, LazyVars) else variables


def render(source: str, variables: Mapping[str, Any]) -> Any:
    """Render one template string against lazily resolved variables."""
    if not is_template(source):
        return source
    with as_template_errors():
        template = _compile(source)
        context = template.new_context(as_read(variables), shared=True)  # type: ignore[arg-type]
        return _concat(template.root_render_func(context))


@contextlib.contextmanager
def as_template_errors() -> Iterator[None]:
    """What rendering raises (Jinja's errors, a filter's own exception) as a TemplateError."""
    try:
        yield
    except jinja2.UndefinedError as exc:
        raise UndefinedVariable(exc.message or "") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template error: {exc}") from None
    except TemplateError:
        raise
    except Exception as exc:
        raise TemplateError(f"template error: {type(exc).__name__}: {exc}") from None


def template_value(value: Any, variables: Mapping[str, Any]) -> Any:
    """Template strings anywhere inside a nested value; keys whose value is `omit` are dropped."""
    if isinstance(value, str):
        return render(value, variables)
    if isinstance(value, dict):
        out = {k: template_value(v, variables) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != OMIT}
    if isinstance(value, list):
        return [template_value(v, variables) for v in value]
    return value


def _bare(expression: str) -> str:
    """A bare Jinja expression, its optional `{{ }}` stripped."""
    expr = expression.strip()
    return expr[2:-2] if expr.startswith("{{") and expr.endswith("}}") else expr


def _as_template(expression: str) -> str:
    """A bare Jinja expression as the template that evaluates it."""
    return "{{ (" + _bare(expression) + ") }}"


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """Evaluate a bare Jinja expression (`when:`, `assert: that:`, `debug: var:`)."""
    return render(_as_template(expression), variables)


def check_expression(expression: str) -> str | None:
    """A syntax error message for a bare expression, read as evaluate() reads it (a literal
    `{{` inside one is no template), or None if it parses."""
    try:
        _compile(_as_template(expression))
    except jinja2.TemplateSyntaxError as exc:
        return "template syntax error: " + _told_as_written(_bare(expression), exc.message or "")
    return None


def _told_as_written(bare: str, message: str) -> str:
    """A bare expression's syntax error in the user's terms: not the parentheses evaluate()
    adds, nor the `}}` around them, when the expression has none of its own ("x ==" is
    "unexpected end of the expression", not "unexpected ')'")."""
    if "}" in bare:  # its own braces may be what the message names: left as Jinja says it
        return message
    try:
        _compile("{{ " + bare + " }}")
    except jinja2.TemplateSyntaxError as plain:
        message = plain.message or message
    return message.replace("'}'", "end of the expression").replace("'end of print statement'", "end of the expression")


def truthy(expression: Any, variables: Mapping[str, Any]) -> bool:
    """A conditional (`when`, `until`, `failed_when`, `assert`): as in ansible-core 2.19, its
    result must be a boolean; a string, number, list or None is an error, not a silent guess."""
    if isinstance(expression, bool):
        return expression
    if isinstance(expression, list):
        return all(truthy(e, variables) for e in expression)
    result = evaluate(str(expression), variables)
    if not isinstance(result, bool):
        raise TemplateError(f"Conditional result ({bool(result)}) was derived from value of type "
                            f"'{type(result).__name__}' in '{expression}'. Conditionals must have a "
                            "boolean result.")
    return result
