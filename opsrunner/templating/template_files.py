"""The template module's files: rendered as ansible-core's template module renders them, and
parsed when the playbook loads.

ansible-core renders a template file with `trim_blocks` on (a block tag's newline is dropped),
`lstrip_blocks` off, without Jinja's `keep_trailing_newline`, and then puts back the newlines
the file ended with that the rendering lost; a file that is one `{{ expression }}` gives that
value (a number keeps no trailing newline), a `None` renders as nothing, and a backslash in a
string constant is an escape, not a literal. `{% include %}` and `{% import %}` look in each
search folder's `templates/`, then the folder, then the template's own folder.

Task arguments keep the shared environment (environment.py); only template files use these.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import defaults, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from opsrunner.errors import SourcePos, TemplateError, UndefinedVariable
from opsrunner.templating.environment import ENV, as_read, as_template_errors

#: newline_sequence as written in YAML, escaped or not (ansible-core takes both).
NEWLINES = {"\n": "\n", "\r": "\r", "\r\n": "\r\n", "\\n": "\n", "\\r": "\r", "\\r\\n": "\r\n"}
#: A first line `#jinja2: trim_blocks: False, lstrip_blocks: True` sets the file's own options.
HEADER = "#jinja2:"


@dataclass(frozen=True)
class FileOptions:
    """The Jinja settings a template file is rendered with: ansible-core's defaults, the task's
    trim_blocks/lstrip_blocks/newline_sequence, then the file's `#jinja2:` line."""

    block_start_string: str = defaults.BLOCK_START_STRING
    block_end_string: str = defaults.BLOCK_END_STRING
    variable_start_string: str = defaults.VARIABLE_START_STRING
    variable_end_string: str = defaults.VARIABLE_END_STRING
    comment_start_string: str = defaults.COMMENT_START_STRING
    comment_end_string: str = defaults.COMMENT_END_STRING
    line_statement_prefix: str | None = None
    line_comment_prefix: str | None = None
    trim_blocks: bool = True
    lstrip_blocks: bool = False
    newline_sequence: str = "\n"
    keep_trailing_newline: bool = False

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> FileOptions:
        newline = str(args.get("newline_sequence") or "\n")
        if newline not in NEWLINES:
            raise TemplateError(f"template: newline_sequence must be one of \\n, \\r or \\r\\n, not {newline!r}")
        return cls(trim_blocks=_flag(args.get("trim_blocks"), True),
                   lstrip_blocks=_flag(args.get("lstrip_blocks"), False), newline_sequence=NEWLINES[newline])

    def with_header(self, source: str) -> tuple[str, FileOptions]:
        """The text without its `#jinja2:` line, and the options that line sets (ValueError when
        it is malformed); a file without one as it is."""
        if not source.startswith(HEADER):
            return source, self
        eol = source.find("\n")
        if eol == -1:
            raise ValueError(f"missing newline after the {HEADER!r} line")
        changes: dict[str, Any] = {}
        for pair in source[len(HEADER):eol].split(","):
            key, sep, value = pair.partition(":")
            if not sep or key.strip() not in _FIELDS:
                raise ValueError(f"{HEADER!r} line: {pair.strip()!r} is not one of {', '.join(sorted(_FIELDS))}: VALUE")
            try:
                changes[key.strip()] = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError):
                raise ValueError(f"{HEADER!r} line: {key.strip()}: {value.strip()} is not a Python literal") from None
        options = dataclasses.replace(self, **changes)
        options.validate()
        return source[eol + 1:], options

    def validate(self) -> None:
        for field in dataclasses.fields(self):
            value, kind = getattr(self, field.name), _FIELDS[field.name]
            if not (isinstance(value, kind) or (value is None and field.name.startswith("line_"))):
                raise ValueError(f"{field.name} must be {kind.__name__}, not {value!r}")
        if self.newline_sequence not in ("\n", "\r", "\r\n"):
            raise ValueError(f"newline_sequence must be one of \\n, \\r or \\r\\n, not {self.newline_sequence!r}")
        starts = {self.block_start_string, self.variable_start_string, self.comment_start_string}
        if len(starts) < 3:
            raise ValueError("block, variable and comment start strings must be different")

    def starts(self, source: str) -> bool:
        """Whether the text holds any template at all (ansible-core leaves other text as it is)."""
        return source.startswith(HEADER) or any(
            mark in source for mark in (self.block_start_string, self.variable_start_string, self.comment_start_string))


_FIELDS: dict[str, type] = {f.name: (bool if f.type == "bool" else str) for f in dataclasses.fields(FileOptions)}


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "true", "on", "1", "y", "t")
    return bool(value)


def _concat(parts: Iterable[Any]) -> Any:
    """ansible-core's concatenation: `None` parts are left out, one part keeps its type, more
    are joined as text. An undefined part raises (StrictUndefined) when made text."""
    items = [part for part in parts if part is not None]
    if not items:
        return None
    if len(items) == 1:
        if isinstance(items[0], jinja2.Undefined):
            str(items[0])
        return items[0]
    return "".join(str(item) for item in items)


class _FileEnv(ImmutableSandboxedEnvironment):
    """Jinja's own lexer (no backslash doubling: ansible-core's escape_backslashes=False), the
    shared environment's code generator (no folding of expressions), and ansible-core's concat
    (macros, `{% set %}` blocks)."""

    code_generator_class = ENV.code_generator_class
    concat = staticmethod(_concat)


@lru_cache(maxsize=32)
def _environment(options: FileOptions, search: tuple[Path, ...]) -> _FileEnv:
    env = _FileEnv(undefined=ENV.undefined, autoescape=False, loader=jinja2.FileSystemLoader([str(p) for p in search]),
                   **dataclasses.asdict(options))
    env.filters.update(ENV.filters)
    env.tests.update(ENV.tests)
    env.globals.update(ENV.globals)
    return env


@lru_cache(maxsize=256)
def _compile(options: FileOptions, search: tuple[Path, ...], source: str) -> jinja2.Template:
    return _environment(options, search).from_string(source)


def template_source(value: str, dirs: Sequence[Path]) -> Path | None:
    """The file a template task's `src` names, as the module finds it at run time (the role's
    templates/, the role, the playbook's folder; not the role's files/), or None."""
    candidate = Path(value).expanduser()
    if candidate.is_absolute():
        return candidate if candidate.is_file() else None
    for folder in dirs:
        if folder.name == "files" and folder.parent / "templates" in dirs:
            continue
        if (folder / candidate).is_file():
            return folder / candidate
    return None


def include_path(dirs: Sequence[Path], src: Path) -> tuple[Path, ...]:
    """Where `{% include %}`/`{% import %}` names are looked up, as ansible-core does: each of
    the task's folders (the role, the playbook's), then the template's own folder, each one's
    templates/ before it."""
    roots = [d for d in dirs if not (d.name in ("files", "templates") and d.parent in dirs)]
    out: list[Path] = []
    for root in [*roots, src.parent]:
        for folder in (root / "templates", root):
            if folder not in out:
                out.append(folder)
    return tuple(out)


def render_file(source: str, variables: Mapping[str, Any], name: str, search: tuple[Path, ...],
                options: FileOptions) -> str:
    """A template file's text, rendered as ansible-core's template module renders it."""
    if not options.starts(source):
        return source
    text, file_options = _split_header(source, name, options)
    with as_template_errors():  # what the file's own lines do not explain
        try:
            template = _compile(file_options, search, text)
            context = template.new_context(as_read(variables), shared=True)  # type: ignore[arg-type]
            result = _concat(template.root_render_func(context))
        except jinja2.TemplateSyntaxError as exc:
            where = SourcePos(exc.filename, exc.lineno) if exc.filename else \
                SourcePos(name, exc.lineno + (text is not source))
            raise TemplateError(f"template syntax error: {exc.message}", in_file=where) from None
        except jinja2.TemplateNotFound as exc:
            raise TemplateError(f"template {' or '.join(repr(t) for t in exc.templates)} not found "
                                f"(looked in {', '.join(str(p) for p in search)})", in_file=SourcePos(name)) from None
        except jinja2.UndefinedError as exc:
            raise UndefinedVariable(exc.message or "", _line_of(exc, template, text, name, text is not source)) \
                from None
    if result is None:
        return ""
    if not isinstance(result, str):
        return str(result)  # one expression's value: ansible-core adds no newline to it
    lost = _newlines_at_end(source) - _newlines_at_end(result)
    return result + options.newline_sequence * lost if lost > 0 else result


def _line_of(exc: jinja2.UndefinedError, template: jinja2.Template, text: str, name: str,
             header: bool) -> SourcePos:
    """`file:line` of the template line an undefined variable was read on: the deepest frame of
    the template's compiled code (mapped back through Jinja's line table); else, as a value
    printed whole is made text after the template's code returned, the first template tag
    that names the variable; else the file alone."""
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == template.filename:
            line = template.get_corresponding_lineno(tb.tb_lineno)
        tb = tb.tb_next
    missing = re.match(r"'(\w+)' is undefined", exc.message or "")
    if not line and missing:
        named = re.compile(r"(\{\{|\{%)[^}]*\b" + re.escape(missing.group(1)) + r"\b")
        line = next((i for i, row in enumerate(text.splitlines(), 1) if named.search(row)), 0)
    return SourcePos(name, line + header) if line else SourcePos(name)


def _split_header(source: str, name: str, options: FileOptions) -> tuple[str, FileOptions]:
    try:
        return options.with_header(source)
    except ValueError as exc:
        raise TemplateError(f"template syntax error: {exc}", in_file=SourcePos(name, 1)) from None


def _newlines_at_end(text: str) -> int:
    return len(text) - len(text.rstrip("\n"))


@dataclass(frozen=True)
class FileProblem:
    """A template file that cannot be rendered, found before any host is touched."""

    file: str
    line: int
    message: str


def check_file(src: Path, search: tuple[Path, ...]) -> list[FileProblem]:
    """Parse a template file and the files it includes, imports or extends by a constant name:
    a syntax error, a file that is missing or is not UTF-8 text."""
    try:
        source = src.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [FileProblem(str(src), 0, f"cannot read template: {exc}")]
    if not FileOptions().starts(source):
        return []
    try:
        text, options = FileOptions().with_header(source)
    except ValueError as exc:
        return [FileProblem(str(src), 1, f"template syntax error: {exc}")]
    return list(_check_source(_environment(options, search), text, str(src), set(), int(text is not source)))


#: The tags that read another template file by name.
_LOADS = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


def _check_source(env: _FileEnv, source: str, filename: str, seen: set[str], offset: int = 0) -> Iterator[FileProblem]:
    """`offset`: the lines of a `#jinja2:` header taken off the top of the file."""
    seen.add(filename)
    try:
        tree = env.parse(source, filename=filename)
        env.compile(tree, filename=filename)  # an unknown filter or test, too
    except jinja2.TemplateSyntaxError as exc:
        yield FileProblem(filename, exc.lineno + offset, f"template syntax error: {exc.message}")
        return
    for node in tree.find_all(_LOADS):
        if not isinstance(node, _LOADS):
            continue
        names = _constant_names(node.template)
        if not names:
            continue  # a name only known once rendered
        try:
            found = _first_source(env, names)
        except UnicodeDecodeError as exc:
            yield FileProblem(filename, node.lineno + offset, f"cannot read template {names[0]!r}: {exc}")
            continue
        if found is None:
            if not getattr(node, "ignore_missing", False):
                yield FileProblem(filename, node.lineno + offset, f"template {' or '.join(repr(n) for n in names)} not "
                                  f"found (looked in {', '.join(getattr(env.loader, 'searchpath', []))})")
        elif found[1] not in seen:
            yield from _check_source(env, found[0], found[1], seen)


def _constant_names(node: nodes.Expr) -> list[str]:
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, nodes.Tuple | nodes.List) and all(
            isinstance(item, nodes.Const) and isinstance(item.value, str) for item in node.items):
        return [item.value for item in node.items if isinstance(item, nodes.Const)]
    return []


def _first_source(env: _FileEnv, names: list[str]) -> tuple[str, str] | None:
    """The text and file name of the first of `names` the loader finds (select_template's rule)."""
    assert env.loader is not None
    for name in names:
        try:
            source, filename, _ = env.loader.get_source(env, name)
        except jinja2.TemplateNotFound:
            continue
        return source, filename or name
    return None
