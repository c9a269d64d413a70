"""-e values: key=value pairs, YAML/JSON mappings and @files, as ansible-playbook takes them.

A problem in an -e names which one it is (`-e #2 (of 3)`), and quotes a piece of it as
`********` where that piece may be a secret or names one: a key that is secret-named (by the
default patterns of secrets.py and those the run's variables configure), a word that may be
the rest of a secret-named variable's value (cut off by a space, or typed after its name with
the `=` forgotten), a bare word that is no short lowercase name (a token or a password pasted
without its key). Any other key is quoted as typed (`MODEL.lr`, `1bad`, `LR`).
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsrunner.errors import GivenPos, Problem, SourcePos, ValidationError
from opsrunner.kvsplit import BadEscapeError, UnbalancedError, key_value, split_args
from opsrunner.secrets import MASK, Masker, assigned_names, configured_patterns, is_secret_name


@dataclass(frozen=True)
class SecretNames:
    """The secret-name rule an -e's problems are quoted by: the default patterns, and those the
    run's variables configure (`secret_name_patterns` in the inventory, the playbook, an -e)."""

    patterns: tuple[str, ...] = ()

    def __call__(self, name: str) -> bool:
        return is_secret_name(name) or (bool(self.patterns) and is_secret_name(name, self.patterns))


def parse_extra_vars(values: Sequence[str], patterns: tuple[str, ...] = ()) -> dict[str, Any]:
    """The variables of every -e, later ones winning; each remembers the -e that gave it (a
    PosDict's key_pos): `-e name=value`, or its key's line in `-e @file` or `-e '{...}'`.
    `patterns`: secret-name patterns the run configures besides an -e's own."""
    result, problems = _every_extra_vars(values, SecretNames(patterns))
    if problems:
        own = configured_patterns([result])  # an -e that sets secret_name_patterns: they hold for the others
        if own:
            problems = _every_extra_vars(values, SecretNames((*patterns, *own)))[1]
        raise ValidationError(problems)
    return result


def _every_extra_vars(values: Sequence[str], secret: SecretNames) -> tuple[dict[str, Any], list[Problem]]:
    from opsrunner.yamlsource import positioned

    result = positioned()
    problems: list[Problem] = []
    for number, value in enumerate(values, 1):
        which = f"-e #{number} (of {len(values)})"
        data, found = _one_extra_vars(value, which, secret)
        problems += found
        if not found:
            result = positioned(result, data)
    return result, problems


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


def masked_argv(argv: Sequence[str], masker: Masker) -> list[str]:
    """A command line as the history records and shows it (Masker.mask_argv); besides, an -e
    that is `refused` and names a secret in any word, not only one it assigns (`-e 'db_password
    Swordfish'`: a forgotten `=`), hidden whole: where its value is, nothing can tell."""
    words = list(argv)
    for index, word in enumerate(words):
        value = _e_value(word, words[index - 1] if index else "")
        if value and any(masker.is_secret_name(name) for name in _WORD.findall(value)) and refused(value):
            words[index] = word[:len(word) - len(value)] + MASK
    return masker.mask_argv(words, refused)


def _e_value(word: str, before: str) -> str | None:
    """The value of -e that `word` gives (`-e V`, `-eV`, `--extra-vars V`, `--extra-vars=V`)."""
    if before in ("-e", "--extra-vars"):
        return word
    if word.startswith("--extra-vars="):
        return word.removeprefix("--extra-vars=")
    return word[2:] if word.startswith("-e") and len(word) > 2 else None


def _one_extra_vars(value: str, which: str, secret: SecretNames) -> tuple[Any, list[Problem]]:
    """One -e's variables, or the problems that keep it from giving any."""
    from opsrunner.yamlsource import load_yaml_file, load_yaml_text

    if value and not value.strip():  # `-e ''` gives nothing, as in ansible-playbook; blanks are a slip
        return None, [Problem(SourcePos(which), "it is empty (only blanks), not key=value words")]
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
            return None, [_told_as(problem, which, value, secret) for problem in exc.problems]
    elif value[:1] in ("/", "."):
        path = _shown(value, value, secret, _PATH)
        return None, [Problem(SourcePos(which), f"to read variables from {path}, write -e @{path}")]
    else:
        return _key_values(value, which, secret)
    if data is not None and not isinstance(data, dict):
        return None, [Problem(SourcePos(which), "extra vars must be a mapping")]
    if (at := _unencodable(data)) is not None:
        key = _shown_key_path(at, secret)
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


def _key_values(value: str, which: str, secret: SecretNames) -> tuple[Any, list[Problem]]:
    """`-e 'k="a b" n=1 x={{ y }}'`: split and unquoted as ansible-playbook does (kvsplit);
    every value a string. A word with no `=`, which ansible-core would keep as `_raw_params`,
    is refused: it is a value cut off by a space (`-e 'kill_grace= 30'`) or a forgotten `=`."""
    from opsrunner.yamlsource import positioned

    try:
        words = split_args(value)
    except UnbalancedError as exc:
        return None, [Problem(SourcePos(which), f"cannot split it into key=value words: {exc}")]
    quoting = _Quoting(secret, _cut_off_secrets(words, secret))
    data, problems = positioned(), []
    for index, word in enumerate(words, 1):
        where = f"word {index} of {len(words)}"
        if not word.strip():  # blanks before the first word (`-e ' a=1'`): they hold nothing
            problems.append(Problem(SourcePos(which), f"{where} is empty (only blanks): leave the blanks out"))
            continue
        try:
            pair = key_value(word)
        except BadEscapeError as exc:
            problems.append(Problem(SourcePos(which), f"{where} has {exc}"))
            continue
        if pair is None:
            shown, note = quoting.quoted(quoting.word(words, index))
            problems.append(Problem(SourcePos(which), f"expected key=value, got {shown} ({where}{note})"
                                    f"{quoting.cut_off_hint(words, index)}"))
            continue
        if cut := quoting.cut_off_hint(words, index):  # `api_token= c2VjcmV0=`: the token became a key
            problems.append(Problem(SourcePos(which), f"{where} follows an empty value{cut}, or give an empty "
                                    "one as k=''"))
            continue
        key, val = pair
        if not key.isidentifier():
            key_shown = quoting.key(key, index)
            shown, note = quoting.quoted(key_shown)
            problems.append(Problem(SourcePos(which), f"{shown} is not a variable name (letters, digits and _, "
                                    f"not starting with a digit; {where}{note})", key_shown))
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
#: A word with no `=` an error may quote: a short lowercase word (`novalue`: a forgotten `=`)
#: or a short number (`1000`: a value cut off by a space). Anything else may be a secret (a
#: token or a password pasted without its key: `Swordfish`, `OOPS`); a key (`LR = 1`) is
#: quoted as a key.
_HARMLESS = re.compile(r"[a-z_]{1,16}|[0-9]{1,6}")
#: A key (what comes before the first `=` of a word, or a mapping's key) an error may quote
#: unless it is secret-named: a short run of name characters (`1bad`, `log-path`, `MODEL.lr`)
#: or a dotted or dashed name of any length (`model.optimizer.lr_warmup`). Anything else may
#: be a token pasted before an `=`.
_KEY = re.compile(r"[A-Za-z0-9_.-]{1,20}|[A-Za-z_][A-Za-z0-9_]*(?:[.-][A-Za-z_][A-Za-z0-9_]*)+")
#: What a YAML message of an `-e '{...}'` may quote (a token or a value) when its -e names no secret.
_YAML_PIECE = re.compile(r"[A-Za-z0-9_-]{1,20}")
#: A path an error may quote when its -e names no secret.
_PATH = re.compile(r"[\w./~-]+")
_WORD = re.compile(r"[A-Za-z0-9_]+")


def _cut_off_secrets(words: list[str], secret: SecretNames) -> frozenset[int]:
    """The words (1-based) that may be the rest of a secret-named variable's value cut off by a
    space (`db_password=Tr0ub4dor &3xyz`, `train_env={HF_TOKEN: tok abc}`) or typed after its
    name with the `=` forgotten (`db_password Swordfish`, `db_password = swordfish`): every
    word after one that assigns or names such a variable, up to the next that assigns anything
    (as a recorded command line hides them: Masker.mask_argv). Punctuation (`=`, `:`) alone
    neither assigns nor ends the run."""
    hidden: set[int] = set()
    after_secret = False
    for index, word in enumerate(words, 1):
        if after_secret and _SYNTAX.fullmatch(word.strip()):
            continue
        if after_secret and "=" not in word:
            hidden.add(index)
            continue
        names = assigned_names(word) if "=" in word else [*assigned_names(word), *_WORD.findall(word)]
        after_secret = any(secret(name) for name in names)
    return frozenset(hidden)


@dataclass(frozen=True)
class _Quoting:
    """What a problem may quote of one `k=v` -e's words: each piece as typed, or MASK."""

    secret: SecretNames
    #: The words that may be the rest of a secret value (_cut_off_secrets).
    cut_off: frozenset[int]

    def key(self, key: str, index: int) -> str:
        """The key of word `index`: as typed, unless it is secret-named, no name (_KEY), or in
        the cut-off rest of a secret."""
        return MASK if index in self.cut_off else _key_shown(key, self.secret)

    def word(self, words: list[str], index: int) -> str:
        """Word `index`, which has no `=`: as typed where it is syntax, or a short lowercase
        word or number (_HARMLESS) that is not secret-named, or a key the next word assigns
        (`LR = 1`), outside the cut-off rest of a secret."""
        word = words[index - 1]
        if index in self.cut_off:
            return MASK
        if index < len(words) and words[index].startswith("="):  # `LR = 1`: a key typed with spaces
            return _key_shown(word, self.secret)
        if _SYNTAX.fullmatch(word) or (_HARMLESS.fullmatch(word) and not self.secret(word)):
            return word
        return MASK

    @staticmethod
    def quoted(shown: str) -> tuple[str, str]:
        """A piece as a message quotes it, and the note a masked one gets."""
        return (f"'{MASK}'", "; not shown: it may hold a secret") if shown == MASK else (repr(shown), "")

    def cut_off_hint(self, words: list[str], index: int) -> str:
        """Where the word before ends in `=`, the value was cut off by a space: say so."""
        before = words[index - 2].strip() if index > 1 else ""
        if not before.endswith("="):
            return ""
        return (f"; a space ends the value of {self.key(before[:-1], index - 1)}=: quote a value with spaces "
                """(-e 'k="a b"')""")


def _key_shown(key: str, secret: SecretNames) -> str:
    """A key as a problem quotes it: as typed where it is syntax (`=` alone has the key ''),
    or a name (_KEY) that is not secret-named."""
    return key if _SYNTAX.fullmatch(key) or (_KEY.fullmatch(key) and not secret(key)) else MASK


def _shown_key_path(parts: Sequence[str], secret: SecretNames) -> str:
    """A key path as a problem names it, each key as _key_shown quotes it; after one that is no
    name (`HF_TOKEN:tok.x`: a secret typed into a key), every key masked."""
    shown, hiding = [], False
    for part in parts:
        hiding = hiding or not _KEY.fullmatch(part)
        shown.append(MASK if hiding else _key_shown(part, secret))
    return ".".join(shown)


def _shown(piece: str, text: str, secret: SecretNames, harmless: re.Pattern[str]) -> str:
    """`piece` of the -e `text` (not a key: a YAML message's token or value, a path), as an
    error may quote it: MASK unless it is syntax, or plainly harmless where `text` names no
    secret (`{"HF_TOKEN": ...}`, `db_password=...`)."""
    if _SYNTAX.fullmatch(piece):
        return piece
    if harmless.fullmatch(piece) and not _names_secret(text, secret):
        return piece
    return MASK


@functools.lru_cache(maxsize=16)
def _names_secret(text: str, secret: SecretNames) -> bool:
    """Whether an -e names a secret anywhere: asked for every piece an error quotes, once per
    -e (a 72 KB -e with thousands of bad words took 9.5 s, scanned once per word)."""
    return any(secret(word) for word in set(_WORD.findall(text)))


def _told_as(problem: Problem, which: str, text: str, secret: SecretNames) -> Problem:
    """A problem of an `-e '{...}'` told at which -e it is, what it quotes of it masked where
    it may be a secret (a YAML message quotes a token, a value or a key: a key as any other)."""
    keys = {problem.key_path, *problem.key_path.split(".")} - {""}

    def shown(match: re.Match[str]) -> str:
        piece = match.group(1)
        return repr(_key_shown(piece, secret) if piece in keys else _shown(piece, text, secret, _YAML_PIECE))

    message = re.sub(r"'([^']*)'", shown, problem.message)
    key = _shown_key_path(problem.key_path.split("."), secret) if problem.key_path else ""
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
