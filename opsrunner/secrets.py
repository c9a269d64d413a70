"""What is secret, and masking: the one place that hides secrets from every output.

Secret values come from three sources:
- variables whose names match the secret-name patterns (`*password*`, `*passwd*`,
  `*secret*`, `*token*`, `*api_key*`; a `secret_name_patterns` variable replaces the list),
  at any depth of a mapping; `become_password` (and Ansible's `ansible_become_password`,
  `ansible_become_pass`) whatever the patterns;
- values tagged `!secret` in YAML (they load as `SecretStr`);
- values handed to `Masker.add` directly.
A `Masker` replaces each known secret value (and its quoted/escaped spellings) with `MASK`
in text, nested values, task results and engine events. `censor` implements `no_log`:
the task's arguments and results are replaced as a whole.

The engine owns one Masker per run and masks every event before any reporter sees it;
other outputs (error messages, run history) call `Masker.mask` / `mask_value` /
`mask_result` / `mask_event` with the run's masker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools
import json
import re
import shlex
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, cast

from opsrunner.becomeopts import PASSWORD_VARS
from opsrunner.coercion import show_value, strict_boolean
from opsrunner.errors import GivenPos, Problem, Quoted, ValidationError
from opsrunner.events import CommandSent, Event, Notice, TaskEnd, TaskProgress, TaskStart
from opsrunner.results import TaskResult


class _Inventory(Protocol):
    """What masker_for reads of an Inventory (a protocol: no import of the inventory package)."""

    @property
    def hosts(self) -> Mapping[str, Any]: ...

    def var_layers(self, hostname: str) -> list[Mapping[str, Any]]: ...

MASK = "********"
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
DEFAULT_SECRET_NAMES: tuple[str, ...] = ("*password*", "*passwd*", "*secret*", "*token*", "*api_key*")
#: The variable that replaces DEFAULT_SECRET_NAMES (a list of glob patterns, case-insensitive).
PATTERNS_VAR = "secret_name_patterns"
#: Values shorter than this are not masked: masking every "1" or "on" would garble all output.
MIN_SECRET_LEN = 3
#: The magic variables (hostvars.VariableManager._magic) that the engine makes from inventory
#: names and run flags, above every other layer: never secrets, so add_vars passes them by. Their
#: host lists are new for each task and host, and searching them cost a task time in proportion
#: to the play's hosts: a run's time grew with the square of its hosts.
ENGINE_MADE_VARS = frozenset({
    "inventory_hostname", "inventory_hostname_short", "groups", "group_names", "hostvars", "play_hosts",
    "ansible_play_batch", "ansible_play_hosts", "check_mode", "ansible_check_mode", "ansible_verbosity",
    "ansible_run_tags", "ansible_skip_tags", "playbook_dir", "opsrunner_playbook", "opsrunner_run_id",
})

T = TypeVar("T")
E = TypeVar("E", bound=Exception)


class SecretStr(str):
    """A string tagged `!secret` in YAML: masked wherever it appears in output."""

    __slots__ = ()


#: Secret whatever `secret_name_patterns` says: the variables that hold the become password.
ALWAYS_SECRET_NAMES = frozenset(PASSWORD_VARS)


def is_secret_name(name: str, patterns: Iterable[str] = DEFAULT_SECRET_NAMES) -> bool:
    return _is_secret_name(name, tuple(patterns))


@functools.lru_cache(maxsize=4096)
def _is_secret_name(name: str, patterns: tuple[str, ...]) -> bool:
    """Every variable name of a host is asked on every task: once per name and patterns."""
    lowered = name.lower()
    return lowered in ALWAYS_SECRET_NAMES or _names_matcher(patterns)(lowered) is not None


@functools.lru_cache(maxsize=32)
def _names_matcher(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One regex for all the (case-insensitive) glob patterns: every variable name of every
    host is tested on every task, 5 fnmatch calls each took ~0.3 ms a host-task."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns)).match


#: A word followed by `:` or `=` and more text, in a key that is not a name: the slips
#: `{HF_TOKEN:tok}` (YAML wants a space after the colon) and `HF_TOKEN=tok`. Any other
#: separator makes a name (`token-file`, `api.token`), whose rest is no secret.
_WORD_THEN_MORE = re.compile(r"[A-Za-z0-9_]+(?=[:=].)", re.DOTALL)


def secret_in_key(key: Any, patterns: Iterable[str] = DEFAULT_SECRET_NAMES) -> str | None:
    """What follows a secret-named word and its separator in a key that is not a name
    (`HF_TOKEN:tok_abc`: YAML reads `{HF_TOKEN:tok_abc}`, with no space after the colon, as
    that one key with a null value): a secret typed into the key; None for any other key."""
    text = str(key)
    if text.isidentifier():
        return None
    for match in _WORD_THEN_MORE.finditer(text):
        if is_secret_name(match.group(), patterns):
            return text[match.end() + 1:]
    return None


def shown_key(key: Any) -> str:
    """A mapping key as a key path or a message shows it (`env.HF_TOKEN`): what secret_in_key
    finds in it masked (`env.HF_TOKEN:********`), whatever masker the output has."""
    text, secret = str(key), secret_in_key(key)
    return text if secret is None else text[:len(text) - len(secret)] + MASK


def chosen_patterns(variables: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The secret-name patterns a variable mapping chooses (its `secret_name_patterns`, a list
    of strings), or None: an unrenderable or malformed setting keeps the defaults."""
    if PATTERNS_VAR not in variables:
        return None
    try:
        chosen = variables[PATTERNS_VAR]
    except Exception:
        return None
    if isinstance(chosen, list | tuple) and all(isinstance(p, str) for p in chosen):
        return tuple(chosen)
    return None


def configured_patterns(variable_sets: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Every pattern that any of `variable_sets` chooses, each once (empty where none does)."""
    found: dict[str, None] = {}
    for variables in variable_sets:
        found.update(dict.fromkeys(chosen_patterns(variables) or ()))
    return tuple(found)


def assigned_names(text: str) -> list[str]:
    """The variables a string assigns, in whichever form an -e takes: `db_password=x`,
    `{"HF_TOKEN": "x"}`, `{HF_TOKEN: x}`."""
    return [match.group("name") for match in _ASSIGNMENT.finditer(text)]


def _spellings(value: str) -> set[str]:
    """The value as it may appear in output: raw, shell-quoted, JSON- and repr-escaped."""
    forms = {value, shlex.quote(value), json.dumps(value)[1:-1], repr(value)[1:-1]}
    return {f for f in forms if len(f) >= MIN_SECRET_LEN}


class Masker:
    """The set of secret values of one run, and the functions that hide them. Thread-safe."""

    def __init__(self, values: Iterable[Any] = ()) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self._regex: re.Pattern[str] | None = None
        #: Every set of secret-name patterns the run's variables chose (mask_vars hides by name).
        self._patterns: set[tuple[str, ...]] = {DEFAULT_SECRET_NAMES}
        #: Containers among variable values already searched for secrets (_walk_once).
        self._walked: dict[tuple[int, tuple[str, ...]], Any] = {}
        for value in values:
            self.add(value)

    # -- what is secret -----------------------------------------------------------------------
    def add(self, value: Any) -> None:
        """Mark a value (a scalar, or every scalar inside a list/dict) as secret."""
        if isinstance(value, dict):
            for item in value.values():
                self.add(item)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                self.add(item)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value)
            if len(text) < MIN_SECRET_LEN:
                return
            forms = _spellings(text)
            with self._lock:
                if not forms <= self._values:
                    self._values |= forms
                    self._regex = None

    def add_vars(self, variables: Mapping[str, Any], chosen: tuple[str, ...] | None = None) -> None:
        """Collect the secrets of a variable mapping: secret-named variables (their templated
        values where they can be rendered, else the raw ones) and `!secret` values at any depth.
        `chosen`: patterns set elsewhere (a play's, for the -e values), instead of its own."""
        chosen = chosen_patterns(variables) if chosen is None else chosen
        patterns = DEFAULT_SECRET_NAMES if chosen is None else chosen
        if chosen is not None:
            with self._lock:
                self._patterns.add(chosen)
        raw = variables.raw() if hasattr(variables, "raw") else variables
        for name in list(raw):
            if name in ENGINE_MADE_VARS:
                continue
            value = raw[name]
            if _is_secret_name(str(name), patterns):
                self.add(value)
                # Undefined or broken templates are reported by the task that uses them.
                with contextlib.suppress(Exception):
                    self.add(variables[name])
            if isinstance(value, dict | list | tuple):
                self._walk_once(value, patterns)
            elif isinstance(value, SecretStr):
                self.add(str(value))

    def add_assigned(self, value: Any) -> None:
        """Mark as secret the value of every secret-named variable that a string assigns, in
        whichever form an -e takes (`db_password=x`, `{"HF_TOKEN": "x"}`, `{HF_TOKEN: x}`), in
        `value` or any string inside it: `-e 'train_env={"HF_TOKEN": "x"}'` gives a string that
        a module reads as a mapping (`env: "{{ train_env }}"`)."""
        if isinstance(value, dict):
            for item in value.values():
                self.add_assigned(item)
        elif isinstance(value, list | tuple):
            for item in value:
                self.add_assigned(item)
        elif isinstance(value, str):
            for match in _ASSIGNMENT.finditer(value):
                if self.is_secret_name(match.group("name")):
                    found = value[match.end():_value_end(value, match.end())]
                    self.add(found[1:-1] if found[:1] in ("'", '"') and found[-1:] == found[:1] else found)

    def _walk_once(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...], patterns: tuple[str, ...]) -> None:
        """_walk a container once per run: every task asks again for the same host vars. Kept
        by identity, holding the value (so its id cannot be reused); variable values are
        replaced, not changed in place (register, set_fact and include_vars store new ones)."""
        key = (id(value), patterns)
        if self._walked.get(key) is value:
            return
        self._walk(value, patterns)
        with self._lock:
            self._walked[key] = value

    def _walk(self, value: Any, patterns: tuple[str, ...]) -> None:
        if isinstance(value, SecretStr):
            self.add(str(value))
        elif isinstance(value, dict):  # plain data only: hostvars and the like are views
            for key, item in value.items():
                if is_secret_name(str(key), patterns):
                    self.add(item)
                    self.add(secret_in_key(key, patterns))
                self._walk(item, patterns)
        elif isinstance(value, list | tuple):
            for item in value:
                self._walk(item, patterns)

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and value in self._values

    def __bool__(self) -> bool:
        return bool(self._values)

    # -- hiding -------------------------------------------------------------------------------
    def _pattern(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._regex is None and self._values:
                ordered = sorted(self._values, key=len, reverse=True)  # longest spelling first
                self._regex = re.compile("|".join(re.escape(v) for v in ordered))
            return self._regex

    def mask(self, text: str) -> str:
        """`text` with every secret value replaced by MASK."""
        pattern = self._pattern()
        if pattern is None or not text:
            return text
        return pattern.sub(MASK, text)

    def mask_value(self, value: T) -> T:
        """A copy of a nested value (str, list, tuple, mapping) with secrets masked."""
        if isinstance(value, str):
            return self.mask(value)  # type: ignore[return-value]
        if isinstance(value, Mapping):
            return {self.mask(k) if isinstance(k, str) else k: self.mask_value(v)
                    for k, v in value.items()}  # type: ignore[return-value]
        if isinstance(value, list | tuple):
            return cast(T, type(value)(self.mask_value(v) for v in value))
        return value

    def is_secret_name(self, name: str) -> bool:
        """Whether a variable of this name is secret under any pattern list the run chose."""
        with self._lock:
            chosen = list(self._patterns)
        return any(is_secret_name(name, patterns) for patterns in chosen)

    def mask_vars(self, variables: Mapping[str, Any]) -> dict[str, Any]:
        """A variable mapping as it may be shown: secret-named values replaced whole (however
        short), every other value with its known secrets masked, at any depth."""
        return {key: MASK if self.is_secret_name(str(key)) else self._shown(value) for key, value in variables.items()}

    def _shown(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return self.mask_vars(value)
        if isinstance(value, list | tuple):
            return [self._shown(item) for item in value]
        return self.mask_value(value)

    def mask_argv(self, argv: Iterable[str], refused: Callable[[str], bool] | None = None) -> list[str]:
        """A command line as it may be shown: the value of every secret-named variable that a
        word assigns, however short and in whichever form -e takes (`a=1 db_password=42`,
        `--extra-vars=api_token=zz`, `{"api_token": "zz"}`, `{api_token: zz}`), hidden whole,
        and every known secret masked. A value cut off by a space is hidden to the next word that
        assigns; an -e that names a secret and is `refused` (extravars.refused), whole
        (`-e 'api_token= abc='`): where its value ends, the parser could not tell."""
        return [self.mask(self._mask_assignments(word, refused)) for word in argv]

    def _mask_assignments(self, word: str, refused: Callable[[str], bool] | None = None) -> str:
        shown, end, named = [], 0, False
        for match in _ASSIGNMENT.finditer(word):
            if match.start() < end or not self.is_secret_name(match.group("name")):
                continue
            if refused is not None and not named and refused(word.removeprefix("--extra-vars=")):
                return word[:len(word) - len(word.removeprefix("--extra-vars="))] + MASK  # no telling its value
            start, named = match.end(), True
            stop = _value_end(word, start, refused is not None, match.group().endswith("="))
            shown.append(word[end:start])
            quote = word[start] if start < len(word) and word[start] in "'\"" else ""
            shown.append(f"{quote}{MASK}{quote}")
            end = stop
        shown.append(word[end:])
        return "".join(shown)

    def mask_problem(self, problem: Problem) -> Problem:
        """A problem as it may be shown: its message masked; where an -e gave its value
        (`-e api_token=ab`), that position as the command line is shown (mask_argv: a
        secret-named variable's value hidden however short); a value the message quotes that came
        through a secret-named variable hidden whole (_unquoted); the problem at its use (`used`,
        which library callers read) likewise. Any other position is a file's: left as it is."""
        pos = problem.pos
        if isinstance(pos, GivenPos):
            shown = self.mask(self._mask_assignments(pos.file))
            pos = pos if shown == pos.file else dataclasses.replace(pos, file=shown)
        used = self.mask_problem(problem.used) if problem.used is not None else None
        message, key_path = self.mask(self._unquoted(problem)), self.mask(problem.key_path)
        quoted = self._quoted_shown(problem.quoted)
        if (pos is problem.pos and used is problem.used and (message, key_path) == (problem.message, problem.key_path)
                and quoted is problem.quoted):
            return problem
        return dataclasses.replace(problem, pos=pos, message=message, key_path=key_path, used=used, quoted=quoted)

    def _unquoted(self, problem: Problem) -> str:
        """The problem's message, the value it quotes hidden whole where it came through a
        secret-named variable (`-e api_token=ab`, `db_password: x7`): told by the name, it is
        hidden however short, where masking by value leaves values under MIN_SECRET_LEN. Only
        the quoted slot (_quoted_slot): a `8` in `file.yml:8:30` or `deadline0.yml` is no value."""
        quoted = problem.quoted
        if quoted is None or not self._by_name(quoted):
            return problem.message
        head, sep, tail = problem.message.partition(_USED_BY)  # where it is used: positions only
        return _quoted_slot(quoted.value).sub(lambda m: f"'{MASK}'" if m.group(0)[:1] in "'\"" else MASK,
                                              head) + sep + tail

    def _quoted_shown(self, quoted: Quoted | None) -> Quoted | None:
        """A problem's quoted value as a library caller may read it: masked as its message."""
        if quoted is None:
            return None
        value = MASK if self._by_name(quoted) else self._shown(quoted.value)
        return quoted if value == quoted.value else dataclasses.replace(quoted, value=value)

    def _by_name(self, quoted: Quoted) -> bool:
        """Whether a quoted value came through a secret-named variable."""
        return any(self.is_secret_name(name) for name in quoted.names)

    def mask_result(self, result: TaskResult) -> TaskResult:
        if self._pattern() is None:
            return result
        return dataclasses.replace(
            result, msg=self.mask(result.msg), stdout=self.mask(result.stdout),
            stderr=self.mask(result.stderr), diff=self.mask(result.diff),
            data=self.mask_value(result.data), items=[self.mask_result(r) for r in result.items],
            item=self.mask_value(result.item), warnings=[self.mask(w) for w in result.warnings])

    def mask_event(self, event: Event) -> Event:
        """The event as reporters may show it (`no_log` results censored, secrets masked)."""
        if isinstance(event, TaskEnd) and event.result.no_log:
            return dataclasses.replace(event, task=self.mask(event.task), result=censor(event.result))
        if self._pattern() is None:
            return event
        if isinstance(event, TaskEnd):
            return dataclasses.replace(event, task=self.mask(event.task), result=self.mask_result(event.result))
        if isinstance(event, TaskStart):
            return dataclasses.replace(event, task=self.mask(event.task))
        if isinstance(event, CommandSent):
            return dataclasses.replace(event, command=self.mask(event.command))
        if isinstance(event, TaskProgress):
            return dataclasses.replace(event, task=self.mask(event.task), text=self.mask(event.text))
        if isinstance(event, Notice):
            return dataclasses.replace(event, message=self.mask(event.message))
        return event


#: What valueorigin.told_where_set adds to a problem's message: where the value is used.
_USED_BY = "; used by "


def _quoted_slot(value: Any) -> re.Pattern[str]:
    """Where a problem's message quotes `value` (coercion.show_value, as rendered: `'8'` for
    8, `30` for 30.0): the whole quoted form, never part of a word, a number or a path."""
    forms = {show_value(value), show_value(str(value))}
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        forms.add(f"{float(value):g}")
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile(r"(?<![\w.:/-])(?:" + "|".join(re.escape(f) for f in ordered) + r")(?![\w.:/-])")


#: A variable assigned in a word of a command line: `name=`, `"name": `, `name: `.
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:=|[\"']?[ \t]*:[ \t]*)")


def _value_end(word: str, start: int, whole: bool = False, by_equals: bool = False) -> int:
    """Where the value that starts at `start` ends: its closing quote, else the next blank,
    comma, brace, bracket or quote. `whole` (a command line's -e, as recorded): a YAML value
    (`{db_password: Tr0ub4dor &3xyz}`) goes on to its comma, bracket or line's end, and a
    `k=v` cut off by a space through the words after it that assign nothing (`&3xyz`)."""
    if start < len(word) and word[start] in "'\"":
        close = word.find(word[start], start + 1)
        return len(word) if close < 0 else close + 1
    ends = " \t\n,}]'\"" if by_equals or not whole else "\n,}]"
    stop = start
    while stop < len(word) and word[stop] not in ends:
        stop += 1
    if not by_equals:
        return start + len(word[start:stop].rstrip()) if whole else stop
    while whole and (rest := _NEXT_WORD.match(word, stop)) and "=" not in rest.group(1):
        stop = rest.end()
    return stop


#: The blanks and the word after a value.
_NEXT_WORD = re.compile(r"[ \t\n]+(\S+)")


def masker_for(inventory: _Inventory, extra_vars: Mapping[str, Any]) -> Masker:
    """A Masker knowing the secrets of the run's inputs: `-e` values and every inventory
    host's variables (for messages printed before or outside the engine, e.g. preflight)."""
    from opsrunner.templating import LazyVars

    masker = Masker()
    masker.add_vars(extra_vars)
    masker.add_assigned(extra_vars)
    for host in inventory.hosts:
        masker.add_vars(LazyVars([*inventory.var_layers(host), extra_vars]))
    return masker


def mask_assigned(text: str) -> str:
    """`text` with the value of each secret-named variable it assigns masked (`HF_TOKEN=tok`,
    `{"api_token": "x"}`): a value a problem quotes from a file, that no variable gave."""
    masker = Masker()
    masker.add_assigned(text)
    return masker.mask(text)


def mask_by_keys(problems: list[Problem], value: Any) -> list[Problem]:
    """Problems found in `value` (a task's arguments) with what its own keys show secret masked,
    in messages and key paths: the values of secret-named keys, and what a key that is no name
    holds after a secret name (`env: {HF_TOKEN:tok_abc}`: secret_in_key)."""
    if not problems:
        return problems  # (every task's arguments come through here: most have none)
    masker = Masker()
    masker._walk(value, DEFAULT_SECRET_NAMES)
    return [masker.mask_problem(p) for p in problems] if masker else problems


def censor(result: TaskResult) -> TaskResult:
    """`no_log`: keep the outcome (status, changed, timing), hide arguments and results."""
    return TaskResult(status=result.status, msg=CENSORED, changed=result.changed,
                      duration_s=result.duration_s, ignored=result.ignored,
                      check_mode_unsupported=result.check_mode_unsupported,
                      items=[censor(r) for r in result.items], data={"censored": CENSORED}, no_log=True)


def no_log_enabled(value: Any, render: Any = None) -> bool:
    """The `no_log` keyword's value, rendered: a boolean as ansible-core takes one (its words in
    any case: coercion.strict_boolean), null for false; ValueError for anything else, on which
    ansible-core fails too (no guessing either way: "abc" is neither shown nor hidden)."""
    rendered = render(value) if render is not None and isinstance(value, str) else value
    return rendered is not None and strict_boolean(rendered)


def mask_error(exc: E, masker: Masker) -> E:
    """The error with the run's secrets masked in what it says (a problem may quote a value;
    an -e position, the value given: Masker.mask_problem)."""
    if isinstance(exc, ValidationError):
        return cast(E, ValidationError([masker.mask_problem(p) for p in exc.problems]))
    text = str(exc)
    masked = masker.mask(text)
    if masked == text:
        return exc
    clone = type(exc).__new__(type(exc))  # not copy.copy: it calls __init__ with args it may not take
    clone.__dict__.update(exc.__dict__)
    clone.args = (masked,)
    return clone
