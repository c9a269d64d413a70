"""YAML loading that keeps source positions and refuses duplicate keys.

Mappings load as `PosDict` and sequences as `PosList`; both remember where they
and each of their keys/items start, so validation errors can name file:line:col.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.secrets import SecretStr


class PosDict(dict[str, Any]):
    """A dict that knows its own position and each key's position."""

    pos: SourcePos
    key_pos: dict[str, SourcePos]

    def at(self, key: str) -> SourcePos:
        return self.key_pos.get(key, self.pos)


class PosList(list[Any]):
    """A list that knows its own position and each item's position."""

    pos: SourcePos
    item_pos: list[SourcePos]

    def at(self, index: int) -> SourcePos:
        if 0 <= index < len(self.item_pos):
            return self.item_pos[index]
        return self.pos


def _mark_pos(filename: str, mark: Any) -> SourcePos:
    return SourcePos(filename, mark.line + 1, mark.column + 1)


#: What YAML counts as a line break (its marks count lines by these).
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def text_pos(text: str, index: int, filename: str) -> SourcePos:
    """The 1-based line and column of `text[index]`, counted as YAML's marks count them."""
    breaks = list(_LINE_BREAK.finditer(text, 0, index))
    line_start = breaks[-1].end() if breaks else 0
    return SourcePos(filename, len(breaks) + 1, index - line_start + 1)


def utf8_problem(data: bytes, filename: str, what: str = "file") -> Problem | None:
    """Where bytes stop being UTF-8: the line and column of the first bad byte; None if they are."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[:exc.start].decode("utf-8")
        return Problem(text_pos(good, len(good), filename),
                       f"{what} is not valid UTF-8 (byte 0x{data[exc.start]:02x})")
    return None


def read_utf8(path: Path, what: str = "file") -> str:
    """A text file's contents; ValidationError naming the first byte that is not UTF-8 (OSError
    is left to the caller, whose words for it differ)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        # The text reader decodes in chunks, so its error's offset is not the file's: decode again.
        problem = utf8_problem(path.read_bytes(), str(path), what)
        raise ValidationError([problem or Problem(SourcePos(str(path)), f"{what} is not valid UTF-8")]) from None


#: libyaml's parser where PyYAML has it (~10x the pure-Python one: ~0.5 ms a task line of a
#: playbook). A document it rejects is parsed again by the pure-Python parser, whose
#: messages say what is wrong in the words this project's errors have always used.
FAST_LOADER: type[Any] | None = getattr(yaml, "CSafeLoader", None)


def _make_loader(filename: str, problems: list[Problem], base: type[Any]) -> type[Any]:
    class Loader(base):  # type: ignore[misc]
        def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except yaml.YAMLError:
                raise
            except (ValueError, TypeError, LookupError, ArithmeticError) as exc:
                # An explicit tag whose text is not of its type (`!!int abc`, `!!bool maybe`,
                # `!!timestamp 2020-13-45`): PyYAML's constructors let Python's error out.
                raise yaml.constructor.ConstructorError(
                    None, None, f"{node.value!r} is not a valid {node.tag.rpartition(':')[2]}",
                    node.start_mark) from exc

        def construct_mapping(
            self, node: yaml.MappingNode, deep: bool = False
        ) -> PosDict:
            self.flatten_mapping(node)
            result = PosDict()
            result.pos = _mark_pos(filename, node.start_mark)
            result.key_pos = {}
            for key_node, value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                key_str = str(key) if not isinstance(key, str) else key
                kpos = _mark_pos(filename, key_node.start_mark)
                if key_str in result:
                    first = result.key_pos[key_str]
                    problems.append(
                        Problem(kpos, f"duplicate key '{key_str}' (first defined at line {first.line})", key_str)
                    )
                result[key_str] = self.construct_object(value_node, deep=True)
                result.key_pos[key_str] = kpos
            return result

        def construct_sequence(
            self, node: yaml.SequenceNode, deep: bool = False
        ) -> PosList:
            result = PosList(self.construct_object(child, deep=True) for child in node.value)
            result.pos = _mark_pos(filename, node.start_mark)
            result.item_pos = [_mark_pos(filename, child.start_mark) for child in node.value]
            return result

        def construct_secret(self, node: yaml.Node) -> SecretStr | None:
            if not isinstance(node, yaml.ScalarNode):
                problems.append(Problem(_mark_pos(filename, node.start_mark),
                                        "!secret applies to a single value (a string or number), "
                                        "not to a list or mapping"))
                return None
            return SecretStr(self.construct_scalar(node))

    Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_mapping)
    Loader.add_constructor("tag:yaml.org,2002:seq", Loader.construct_sequence)
    Loader.add_constructor("!secret", Loader.construct_secret)
    return Loader


#: Deeper nesting is refused: no playbook needs it, and recursive code (the loader, schema
#: checks, templating) would hit Python's recursion limit on it.
MAX_DEPTH = 64
#: A document whose aliases expand to more nodes than this is refused ("billion laughs").
MAX_NODES = 200_000


def _event_pos(filename: str, event: yaml.Event) -> SourcePos:
    mark = event.start_mark  # a yaml.Mark, or libyaml's own Mark class: the same fields
    return _mark_pos(filename, mark) if getattr(mark, "line", None) is not None else SourcePos(filename)


def _check_shape(text: str, filename: str, base: type[Any]) -> None:
    """Refuse too-deep nesting and alias bombs from the event stream (which is not recursive)
    before anything builds or walks the document."""
    sizes: dict[str, int] = {}  # anchor -> nodes it expands to
    stack: list[tuple[str | None, int]] = []  # open collections: (anchor, nodes so far)
    total = 0
    for event in yaml.parse(text, Loader=base):
        if isinstance(event, yaml.AliasEvent):
            size = sizes.get(event.anchor or "", 1)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append((event.anchor, 1))
            if len(stack) > MAX_DEPTH:
                raise ValidationError([Problem(_event_pos(filename, event),
                                               f"nesting deeper than {MAX_DEPTH} levels")])
            continue
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = stack.pop()
            if anchor:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor:
                sizes[event.anchor] = 1
        else:
            continue
        total += size
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1] + size)
        if total > MAX_NODES:
            raise ValidationError([Problem(_event_pos(filename, event),
                                           f"YAML aliases expand to more than {MAX_NODES} values")])


def _parse(text: str, filename: str, base: type[Any]) -> Any:
    """The document, through `base`'s parser; ValidationError for its shape or duplicate keys,
    the parser's own error for bad syntax."""
    problems: list[Problem] = []
    _check_shape(text, filename, base)
    data = yaml.load(text, Loader=_make_loader(filename, problems, base))
    if problems:
        raise ValidationError(problems)
    return data


def load_yaml_text(text: str, filename: str) -> Any:
    """Parse YAML text; raise ValidationError (with positions) on syntax or duplicate keys."""
    if FAST_LOADER is not None:
        try:
            return _parse(text, filename, FAST_LOADER)
        except (yaml.YAMLError, UnicodeError):
            pass  # said again below, in the pure-Python parser's words
    try:
        return _parse(text, filename, yaml.SafeLoader)
    except yaml.reader.ReaderError as exc:  # a character YAML refuses (NUL, control characters)
        code = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        msg = f"YAML syntax error: unacceptable character {code}: {exc.reason}"
        raise ValidationError([Problem(text_pos(text, exc.position, filename), msg)]) from None
    except yaml.MarkedYAMLError as exc:
        raise ValidationError([_syntax_problem(filename, exc)]) from None
    except yaml.YAMLError as exc:
        raise ValidationError([Problem(SourcePos(filename), f"YAML error: {exc}")]) from None


def _syntax_problem(filename: str, exc: yaml.MarkedYAMLError) -> Problem:
    """PyYAML's syntax error at its mark. A quoted string never closed is found at the end of
    the file, lines past the mistake: it is named where the quote opened (the context mark)."""
    if (exc.context == "while scanning a quoted scalar" and exc.context_mark and exc.problem_mark
            and exc.problem == "found unexpected end of stream"):
        end = _mark_pos(filename, exc.problem_mark)
        return Problem(_mark_pos(filename, exc.context_mark), "YAML syntax error: unterminated quoted string "
                       f"opened here (found the end of the file at {end.line}:{end.col})")
    mark = exc.problem_mark or exc.context_mark
    pos = _mark_pos(filename, mark) if mark else SourcePos(filename)
    return Problem(pos, f"YAML syntax error: {exc.problem or exc.context}")


def load_yaml_file(path: Path) -> Any:
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise ValidationError([Problem(SourcePos(str(path)), f"cannot read file: {exc.strerror}")]) from None
    return load_yaml_text(text, str(path))


def positioned(*mappings: Mapping[str, Any] | None) -> PosDict:
    """The mappings merged into one (a later one's key wins), each key keeping where the mapping
    that set it wrote it (its `key_pos`, where it has one): a bad variable's value can then be
    told where it was set, not only where it was used."""
    out = PosDict()
    out.pos, out.key_pos = SourcePos(""), {}
    for mapping in mappings:
        if not mapping:
            continue
        out.update(mapping)
        known = getattr(mapping, "key_pos", None) or {}
        for key in mapping:
            if key in known:
                out.key_pos[key] = known[key]
            else:
                out.key_pos.pop(key, None)
    return out


def key_position(mapping: Mapping[str, Any], key: str) -> SourcePos | None:
    """Where `mapping` (a PosDict, or one built by positioned()) set `key`; None where unknown."""
    known = getattr(mapping, "key_pos", None)
    return known.get(key) if isinstance(known, dict) else None


def pos_of(container: Any, key: Any, fallback: SourcePos) -> SourcePos:
    """Best-known position of `container[key]` (or of the container itself)."""
    if isinstance(container, PosDict) and isinstance(key, str):
        return container.at(key)
    if isinstance(container, PosList) and isinstance(key, int):
        return container.at(key)
    return getattr(container, "pos", fallback)
