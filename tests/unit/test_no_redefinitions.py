"""No function or class is defined twice in a module's body or a class body of the package.

Python keeps the later definition, so a call written for the first one runs the second. ruff's
F811 flags a redefinition only while the first is unused, and mypy leaves the agent's
package's untyped-by-design helpers alone: a helper named after an existing one and called
before the second `def` passed both (it failed the role tests with a TypeError instead).
"""

from __future__ import annotations

import ast
from pathlib import Path

import opsrunner

PACKAGE = Path(opsrunner.__file__).parent
#: Decorators that define the same name again on purpose.
SAME_NAME_DECORATORS = ("overload", "setter", "getter", "deleter", "register")


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    names = set()
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def redefinitions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, second line) of each def or class defined twice in a module's body or
    a class body (definitions under `if` or `try` are alternatives, not redefinitions)."""
    found: list[tuple[str, int, int]] = []
    scopes: list[list[ast.stmt]] = [ast.parse(source).body]
    while scopes:
        seen: dict[str, int] = {}
        for node in scopes.pop():
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(node, ast.ClassDef):
                scopes.append(node.body)
            if _decorator_names(node) & set(SAME_NAME_DECORATORS):
                continue
            if node.name in seen:
                found.append((node.name, seen[node.name], node.lineno))
            seen[node.name] = node.lineno
    return found


def test_the_finder_finds_a_used_then_redefined_helper() -> None:
    source = ("def _switch_back(a):\n    return a\n\n"
              "def undo():\n    return _switch_back(1)\n\n"
              "def _switch_back(a, b):\n    return a + b\n\n"
              "class C:\n    def f(self): ...\n    def f(self, x): ...\n")
    assert redefinitions(source) == [("_switch_back", 1, 7), ("f", 11, 12)]


def test_the_finder_leaves_alternatives_and_properties_alone() -> None:
    source = ("try:\n    def f(): ...\nexcept ImportError:\n    def f(): ...\n"
              "class C:\n    @property\n    def x(self): ...\n    @x.setter\n    def x(self, v): ...\n")
    assert redefinitions(source) == []


def test_no_module_defines_a_name_twice() -> None:
    problems = [f"{path.relative_to(PACKAGE.parent)}:{second}: {name} is defined again (first at line {first})"
                for path in sorted(PACKAGE.rglob("*.py"))
                for name, first, second in redefinitions(path.read_text("utf-8"))]
    assert problems == []
