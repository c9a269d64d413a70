"""`key=value` words as ansible-core splits and reads them (ansible/parsing/splitter.py:
`split_args`, `parse_kv`; ansible/parsing/quoting.py: `unquote`), for `-e`.

Words are split on spaces and newlines, except inside quotes and inside Jinja blocks
(`{{ }}`, `{% %}`, `{# #}`), so `-e 'x={{ y }}'` is one word and `-e 'msg="a b" n=1'` two.
A word's backslash escapes are decoded (`\\n`, `\\t`, `\\"`, `\\x41`), it is cut at its first
`=` not escaped, key and value are stripped, and only a value's outer matching quotes are
removed: `env={"A":"b"}` keeps its JSON as given, quotes and all. Ansible's own quirks are kept
(its block depths are counted per space-separated piece), so a value means here what it means
to ansible-playbook; a word with no `=`, which ansible-core keeps as `_raw_params`, is
returned as such for the caller to refuse.
"""

from __future__ import annotations

import codecs
import re

#: Ansible's Jinja block delimiters, each counted for its own depth.
_BLOCKS = (("{{", "}}"), ("{%", "%}"), ("{#", "#}"))

_HEXCHAR = "[a-fA-F0-9]"
_ESCAPE_SEQUENCE = re.compile(rf"""
    ( \\U{_HEXCHAR * 8}    # 8-digit hex escapes
    | \\u{_HEXCHAR * 4}    # 4-digit hex escapes
    | \\x{_HEXCHAR * 2}    # 2-digit hex escapes
    | \\N\{{[^}}]+\}}      # Unicode characters by name
    | \\[\\'"abfnrtv]      # single-character escapes
    )""", re.UNICODE | re.VERBOSE)


class UnbalancedError(ValueError):
    """A quote or a Jinja block is left open at the end of the text."""


class BadEscapeError(ValueError):
    """A word's escape makes no character that UTF-8 can hold: `\\N{NOSUCH}`, `\\U00110000`,
    a lone surrogate (`\\ud800`). ansible-core crashes or takes it; it could only break the
    output and the history later, after tasks ran."""


def split_args(text: str) -> list[str]:
    """The words of `text`, as ansible-core's split_args makes them (UnbalancedError where a
    quote or a Jinja block is not closed)."""
    words: list[str] = []
    state = _Splitting()
    lines = text.split("\n")
    for number, line in enumerate(lines):
        continued = False
        for index, piece in enumerate(line.split(" ")):
            if not piece and index:  # a run of spaces: kept in the word, as Ansible does
                words[-1:] = [(words[-1] if words else "") + " "]
            elif piece == "\\" and state.quote is None:
                continued = True  # a line continuation: no newline is put back
            else:
                state.take(piece, index, words)
        if number != len(lines) - 1 and not continued:
            words[-1:] = [(words[-1] if words else "") + "\n"]
    if state.quote is not None or any(state.depths):
        raise UnbalancedError("an unbalanced quote or Jinja block ({{ }}, {% %}, {# #})")
    return words


class _Splitting:
    """split_args's state between pieces: the open quote, each Jinja block's depth."""

    def __init__(self) -> None:
        self.quote: str | None = None
        self.depths = [0, 0, 0]

    def take(self, piece: str, index: int, words: list[str]) -> None:
        """Add a space-separated piece: as a new word, or to the word it continues."""
        was_quoted = self.quote is not None
        self.quote = _quote_after(piece, self.quote)
        quoted, nested = self.quote is not None, any(self.depths)
        added = False
        if quoted and not was_quoted and not nested:
            words.append(piece)
            added = True
        elif nested or quoted or was_quoted:
            spacer = " " if index > 0 else ""
            words[-1] += piece if index == 0 and was_quoted else spacer + piece
            added = True
        for block, (opening, closing) in enumerate(_BLOCKS):
            before = self.depths[block]
            opened = piece.count(opening) - piece.count(closing)
            self.depths[block] = max(before + opened, 0)
            if self.depths[block] != before and not added:
                words.append(piece)
                added = True
        if not any(self.depths) and not quoted and not added and piece:
            words.append(piece)


def _quote_after(piece: str, quote: str | None) -> str | None:
    """The quote open after `piece` (a quote preceded by a backslash neither opens nor closes)."""
    for index, char in enumerate(piece):
        if char in "\"'" and (index == 0 or piece[index - 1] != "\\"):
            if quote is None:
                quote = char
            elif char == quote:
                quote = None
    return quote


def decode_escapes(word: str) -> str:
    return _ESCAPE_SEQUENCE.sub(lambda match: codecs.decode(match.group(0), "unicode-escape"), word)


def unquote(value: str) -> str:
    """The value without its outer quotes, where it starts and ends with the same one."""
    if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'" and value[-2] != "\\":
        return value[1:-1]
    return value


def key_value(word: str) -> tuple[str, str] | None:
    """A word's key and value, as ansible-core's parse_kv reads them; None for a word with no
    `=` that is not escaped (a `=` that starts the word does not count, as in ansible-core);
    BadEscapeError where an escape makes no character UTF-8 can hold."""
    try:
        text = decode_escapes(word)
        text.encode("utf-8")
    except UnicodeError as exc:
        raise BadEscapeError("an escape that makes no character (\\N{...} with an unknown name, \\U above "
                             "0010FFFF, a lone surrogate \\ud800-\\udfff)") from exc
    position = 0
    while True:
        position = text.find("=", position + 1)
        if position < 0:
            return None
        if text[position - 1] != "\\":
            return text[:position].strip(), unquote(text[position + 1:].strip())
