"""Jinja2 templating (see environment.py); filters.py and tests.py hold Ansible's filters and tests."""

from opsrunner.templating.environment import (
    ENV,
    OMIT,
    LazyVars,
    UnsafeText,
    check_expression,
    check_syntax,
    evaluate,
    is_template,
    mark_unsafe,
    render,
    template_value,
    truthy,
)

__all__ = ["ENV", "OMIT", "LazyVars", "UnsafeText", "check_expression", "check_syntax", "evaluate", "is_template",
           "mark_unsafe", "render", "template_value", "truthy"]
