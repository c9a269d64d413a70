"""What an `environment:` (of a play, a block, an include or a task) must be: a mapping whose
keys are what `export NAME=...` takes as a name. Checked as soon as it is known, so that a bad
one stops the run before any host is touched: as written, at load (a literal mapping's keys; a
string that is no template); rendered, in preflight, per host (`environment: "{{ train_env }}"`);
and when the task runs, for what only the run knows (a registered result).

Keys are never templated (templating renders values only), so a key written as a template
(`"{{ name }}": x`) is refused at load: the run would send it as it is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from opsrunner.errors import Problem, SourcePos
from opsrunner.secrets import shown_key
from opsrunner.templating import is_template
from opsrunner.yamlsource import PosDict

#: What `export NAME=...` takes as a name.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bad_name(key: Any) -> str | None:
    """Why `key` cannot name an environment variable, or None. The key is shown as a key path
    shows it (shown_key): a secret typed into it (`HF_TOKEN:tok`, YAML's `{HF_TOKEN:tok}`)
    masked, as the shell's `export` would have echoed it."""
    text = str(key)
    if ENV_NAME.fullmatch(text):
        return None
    why = (f"environment variable name '{shown_key(key)}' is not a name (letters, digits and _, not starting "
           "with a digit)")
    return why + "; a key is not templated, only values are" if is_template(text) else why


def not_a_mapping(value: Any) -> str:
    return f"environment must be a mapping, got {type(value).__name__}"


def refusal(value: Any) -> str | None:
    """Why a rendered `environment:` cannot be used, or None: it is no mapping, or a key is no
    name (the first one)."""
    if not isinstance(value, Mapping):
        return not_a_mapping(value)
    return next((why for key in value if (why := bad_name(key)) is not None), None)


def written_problems(value: Any, at: SourcePos, path: str) -> list[Problem]:
    """An `environment:` as a playbook writes it (`at`, `path`: where): each key that is no
    name, told at its own line; a string that is no template. An empty one (`""`, null) is no
    environment, as when the task runs and in Ansible. A template is rendered later (preflight,
    the run); any other shape is the schema's to tell."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [] if is_template(value) else [Problem(at, not_a_mapping(value), path)]
    if not isinstance(value, Mapping):
        return []
    return [Problem(value.at(key) if isinstance(value, PosDict) else at, why, f"{path}.{shown_key(key)}")
            for key in value if (why := bad_name(key)) is not None]
