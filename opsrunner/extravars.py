"""-e values: key=value pairs, YAML/JSON mappings and @files, as ansible-playbook takes them.

A problem in an -e names which one it is (`-e #2 (of 3)`), and quotes a piece of it only
where that piece is plainly no secret: an -e that names a secret anywhere (`HF_TOKEN`,
`db_password`: the secret-name rule of secrets.py) has every piece quoted as `********`.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsrunner.errors import GivenPos, Problem, SourcePos, ValidationError
from opsrunner.kvsplit import BadEscapeError, UnbalancedError, key_value, split_args
from opsrunner.secrets import MASK, is_secret_name


def parse_extra_vars(values: Sequence[str]) -> dict[str, Any]:
    """The variables of every -e, later ones winning; each remembers the -e that gave it (a
    PosDict's key_pos): `-e name=value`, or its key's line in `-e @file` or `-e '{...}'`."""
    from opsrunner.yamlsource import positioned

    result = positioned()
    problems: list[Problem] = []
    for number, value in enumerate(values, 1):
        which = f"-e #{number} (of {len(values)})"
        data, found = _one_extra_vars(value, which)
        problems += found
        if not found:
            result = positioned(result, data)
    if problems:
        raise ValidationError(problems)
    return result


def refused(word: str) -> bool:
    """Whether `word`, as an -e value (`k=v` words or a mapping; not an @file), is refused: a
    recorded command line then shows it as MASK whole where it names a secret (secrets.py)."""
    if word.startswith("@"):
        return False
    try:
        parse_extra_vars([word])
    except ValidationError:
        return True
    return False


def _one_extra_vars(value: str, which: str) -> tuple[Any, list[Problem]]:
    """One -e's variables, or the problems that keep it from giving any."""
    from opsrunner.yamlsource import load_yaml_file, load_yaml_text

    if value.startswith("@"):
        try:
            data = load_yaml_file(Path(value[1:]))
        except ValidationError as exc:
            return None, exc.problems  # told at the file's own name, line and key
        _given_in(data, f"-e @{value[1:]}")
    elif value.lstrip()[:1] in ("{", "["):  # ansible-playbook takes only an unindented one as YAML
        try:
            data = load_yaml_text(value, "<-e>")
        except ValidationError as exc:
            return None, [_told_as(problem, which, value) for problem in exc.problems]
    elif value[:1] in ("/", "."):
        path = _shown(value, value, _PATH)
        return None, [Problem(SourcePos(which), f"to read variables from {path}, write -e @{path}")]
    else:
        return _key_values(value, which)
    if data is not None and not isinstance(data, dict):
        return None, [Problem(SourcePos(which), "extra vars must be a mapping")]
    if (at := _unencodable(data)) is not None:
        key = ".".join(_shown(part, value, _KEY) for part in at)
        return None, [Problem(SourcePos(which), f"{_NO_CHARACTER} in the value of {key or 'it'}", key)]
    return data, []


#: A string UTF-8 cannot hold (a lone surrogate, `"\ud800"`) would break the output and the
#: history after tasks ran.
_NO_CHARACTER = "an escape that makes no character (a lone surrogate \\ud800-\\udfff)"


def _unencodable(data: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """Where in `data` a key or a string UTF-8 cannot hold is (its key path), or None."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeError:
            return path
        return None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, item in items:
        found = _unencodable(key, path) if isinstance(key, str) else None
        if found is None:
            found = _unencodable(item, (*path, str(key)))
        if found is not None:
            return found
    return None


def _key_values(value: str, which: str) -> tuple[Any, list[Problem]]:
    """`-e 'k="a b" n=1 x={{ y }}'`: split and unquoted as ansible-playbook does (kvsplit);
    every value a string. A word with no `=`, which ansible-core would keep as `_raw_params`,
    is refused: it is a value cut off by a space (`-e 'kill_grace= 30'`) or a forgotten `=`."""
    from opsrunner.yamlsource import positioned

    try:
        words = split_args(value)
    except UnbalancedError as exc:
        return None, [Problem(SourcePos(which), f"cannot split it into key=value words: {exc}")]
    data, problems = positioned(), []
    for index, word in enumerate(words, 1):
        where = f"word {index} of {len(words)}"
        try:
            pair = key_value(word)
        except BadEscapeError as exc:
            problems.append(Problem(SourcePos(which), f"{where} has {exc}"))
            continue
        if pair is None:
            shown, note = _quoted(word, value)
            problems.append(Problem(SourcePos(which), f"expected key=value, got {shown} ({where}{note})"
                                    f"{_cut_off_hint(words, index, value)}"))
            continue
        if cut := _cut_off_hint(words, index, value):  # `api_token= c2VjcmV0=`: the token became a key
            problems.append(Problem(SourcePos(which), f"{where} follows an empty value{cut}, or give an empty "
                                    "one as k=''"))
            continue
        key, val = pair
        if not key.isidentifier():
            shown, note = _quoted(key, value, _KEY)
            problems.append(Problem(SourcePos(which), f"{shown} is not a variable name (letters, digits and _, "
                                    f"not starting with a digit; {where}{note})", _shown(key, value, _KEY)))
            continue
        data[key] = val
        data.key_pos[key] = GivenPos(f"-e {key}={shlex.quote(val) if val else ''}")  # as typed: -e log_path=
    return data, _capped(problems, which)


#: Problems told of one -e: a whole file pasted into one (`-e "$(cat vars.yml)"`) has a bad
#: word per line, and a screenful says what is wrong.
MAX_PROBLEMS = 20


def _capped(problems: list[Problem], which: str) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], Problem(SourcePos(which), f"and {more} more problem(s) like these")]


#: What an error may quote of any -e: punctuation (`}}`, `','`) and YAML's names for its tokens
#: (`<stream end>`): no secret is made of them.
_SYNTAX = re.compile(r"[^\w\s]*|<[a-z ]+>")
#: What an error may quote of an -e that names no secret: a short lowercase word (`novalue`) or
#: a short number (`1000`). Anything else may be a secret (a token pasted without its key, the
#: rest of a value cut off by a space).
_HARMLESS = re.compile(r"[a-z_]{1,16}|[0-9]{1,6}")
#: A key (what comes before the first `=` of a word) an error may quote when its -e names no
#: secret: where a name is meant, a mistyped one (`1bad`, `log-path`), shorter than a token.
_KEY = re.compile(r"[A-Za-z0-9_-]{1,20}")
#: A path an error may quote when its -e names no secret.
_PATH = re.compile(r"[\w./~-]+")
_WORD = re.compile(r"[A-Za-z0-9_]+")


def _shown(piece: str, text: str, harmless: re.Pattern[str] = _HARMLESS) -> str:
    """`piece` of the -e `text`, as an error may quote it: MASK unless it is syntax, or plainly
    harmless where `text` names no secret (`{"HF_TOKEN": ...}`, `db_password=...`)."""
    if _SYNTAX.fullmatch(piece):
        return piece
    if harmless.fullmatch(piece) and not _names_secret(text):
        return piece
    return MASK


@functools.lru_cache(maxsize=16)
def _names_secret(text: str) -> bool:
    """Whether an -e names a secret anywhere: asked for every piece an error quotes, once per
    -e (a 72 KB -e with thousands of bad words took 9.5 s, scanned once per word)."""
    return any(is_secret_name(word) for word in set(_WORD.findall(text)))


def _quoted(piece: str, text: str, harmless: re.Pattern[str] = _HARMLESS) -> tuple[str, str]:
    """A piece quoted as an error shows it, and the note a masked one gets."""
    shown = _shown(piece, text, harmless)
    return (repr(piece), "") if shown == piece else (f"'{MASK}'", "; not shown: it may hold a secret")


def _cut_off_hint(words: list[str], index: int, text: str) -> str:
    """Where the word before ends in `=`, the value was cut off by a space: say so."""
    before = words[index - 2].strip() if index > 1 else ""
    if not before.endswith("="):
        return ""
    return (f"; a space ends the value of {_shown(before[:-1], text, _KEY)}=: quote a value with spaces "
            """(-e 'k="a b"')""")


def _told_as(problem: Problem, which: str, text: str) -> Problem:
    """A problem of an `-e '{...}'` told at which -e it is, what it quotes of it masked where
    it may be a secret (a YAML message quotes a token or a key)."""
    message = re.sub(r"'([^']*)'", lambda match: repr(_shown(match.group(1), text, _KEY)), problem.message)
    key = ".".join(_shown(part, text, _KEY) for part in problem.key_path.split(".")) if problem.key_path else ""
    return Problem(SourcePos(which, problem.pos.line, problem.pos.col), message, key)


def _given_in(data: Any, origin: str) -> None:
    """Each key and item of an `-e @file`, at any depth, told as that -e: `-e @vars.yml:3:1`
    (a mapping or list an alias repeats is told once)."""
    from opsrunner.yamlsource import PosDict, PosList

    def given(pos: SourcePos) -> SourcePos:
        return pos if isinstance(pos, GivenPos) else GivenPos(origin, pos.line, pos.col)

    if isinstance(data, PosDict):
        data.pos, data.key_pos = given(data.pos), {k: given(p) for k, p in data.key_pos.items()}
        items = list(data.values())
    elif isinstance(data, PosList):
        data.pos, data.item_pos = given(data.pos), [given(p) for p in data.item_pos]
        items = list(data)
    else:
        return
    for item in items:
        if isinstance(item, PosDict | PosList) and not isinstance(item.pos, GivenPos):
            _given_in(item, origin)
