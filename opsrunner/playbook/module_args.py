"""A task's module arguments at load time: the `key=value` and free forms, conversion to the
declared types, the module's schema, and the controller-side files it reads. Templated values
are checked again once rendered (preflight.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from opsrunner.coercion import coerce_args
from opsrunner.errors import Problem, SourcePos
from opsrunner.includes import vars_file_problems
from opsrunner.modules.registry import module_info
from opsrunner.secrets import mask_by_keys
from opsrunner.templating.template_files import check_file, include_path, template_source
from opsrunner.validation import schema_problems
from opsrunner.yamlsource import PosDict


def module_args(module: str, raw: Any, pos: SourcePos, path: str, filename: str,
                search_dirs: list[Path], extra: Any = None) -> tuple[dict[str, Any], list[Problem], bool]:
    """The arguments as the module gets them (positions kept), every problem found in them, and
    whether they are checked for good: no problem, no template, none left to the check after
    rendering (Task.args_checked). `search_dirs` are where a relative controller-side file may
    be; `extra` is the task's `args:` mapping (the module's own arguments win, as in Ansible)."""
    info = module_info(module)
    args = _args_mapping(raw, pos, info.schema, info.free_form)
    if isinstance(extra, dict) and isinstance(args, PosDict):
        merged = PosDict({**extra, **args})
        extra_pos = extra.key_pos if isinstance(extra, PosDict) else {}
        merged.pos, merged.key_pos = args.pos, {**extra_pos, **args.key_pos}
        args = merged
    problems: list[Problem] = []
    if isinstance(args, dict):
        coerced, refusals = coerce_args(args, info.schema, skip=has_template)
        args.update(coerced)  # in place: a PosDict keeps its positions
        for refusal in refusals:
            top = refusal.arg.split(".")[0].split("[")[0]
            problems.append(Problem(args.at(top) if isinstance(args, PosDict) else pos, refusal.message(module),
                                    f"{path}.{refusal.arg}"))
        if refusals:
            return {}, mask_by_keys(problems, args), False
    left = False  # a problem left to the check after rendering
    for problem in schema_problems(args, info.schema, filename, root=args, fallback=pos):
        if "{{" in problem.message:
            # A templated value (or key), checked again once rendered, before the run. Also
            # a plain value whose allowed types include a template (`mode: "0999"`: "... or a
            # {{ template }}"): told by that check too, so these arguments are not checked for good.
            left = True
            continue
        problems.append(Problem(problem.pos, problem.message,
                                f"{path}{'.' + problem.key_path if problem.key_path else ''}"))
    if not isinstance(args, dict):
        return {}, mask_by_keys(problems, args), False
    problems = mask_by_keys(problems + _local_path_problems(module, args, pos, path, search_dirs)
                            + _template_file_problems(module, args, pos, path, search_dirs)
                            + _vars_file_problems(module, args, pos, path, search_dirs), args)
    return args, problems, not problems and not left and not has_template(args)


def expression_args(module: str) -> tuple[str, ...]:
    """The module's arguments that are bare expressions (`assert: that:`, `debug: var:`)."""
    return tuple(module_info(module).schema.get("x-opsrunner", {}).get("expressions", ()))


def _args_mapping(raw: Any, pos: SourcePos, schema: dict[str, Any], free_form: str | None) -> Any:
    """`module:` alone, `module: key=value ...` and `module: FREE FORM` as a mapping."""
    if raw is None:
        raw = PosDict()
        raw.pos, raw.key_pos = pos, {}
    kv = _key_values(raw, schema) if isinstance(raw, str) else None
    if kv is not None:
        args = PosDict(kv)
        args.pos, args.key_pos = pos, dict.fromkeys(kv, pos)
        return args
    if isinstance(raw, str) and free_form:
        text, trailing = _trailing_options(raw, schema)
        args = PosDict({free_form: text, **trailing})
        args.pos, args.key_pos = pos, dict.fromkeys([free_form, *trailing], pos)
        return args
    return raw


#: Options Ansible takes from the end of a command's free form (`shell: make creates=out`).
FREE_FORM_OPTIONS = ("creates", "removes", "chdir")


def _trailing_options(text: str, schema: dict[str, Any]) -> tuple[str, dict[str, str]]:
    known = [k for k in FREE_FORM_OPTIONS if k in schema.get("properties", {})]
    found: dict[str, str] = {}
    while known:
        match = re.search(rf"\s+({'|'.join(known)})=(\S+)\s*$", text)
        if not match or match.group(1) in found:
            break
        found[match.group(1)] = match.group(2)
        text = text[:match.start()]
    return text, found


def _local_path_problems(module: str, args: dict[str, Any], pos: SourcePos, path: str,
                         search_dirs: list[Path]) -> list[Problem]:
    """Controller-side files a module reads must exist (templated paths are checked at run time)."""
    problems = []
    for key in module_info(module).schema.get("x-opsrunner", {}).get("local_paths", []):
        value = args.get(key)
        if not isinstance(value, str) or "{{" in value or (Path(value).expanduser().is_absolute()
                                                           and Path(value).expanduser().exists()):
            continue
        if not any((d / Path(value).expanduser()).exists() for d in search_dirs):
            where = ", ".join(str(d) for d in search_dirs)
            problems.append(Problem(args.at(key) if isinstance(args, PosDict) else pos,
                                    f"{module} {key} '{value}' not found (looked in {where})", f"{path}.{key}"))
    return problems


def _template_file_problems(module: str, args: dict[str, Any], pos: SourcePos, path: str,
                            search_dirs: list[Path]) -> list[Problem]:
    """A template file a module renders (a path with no template in it) is parsed now, with what
    it includes, imports or extends by name: a syntax error or a missing file is bad input, at
    the template's line, before any host is touched."""
    problems = []
    for key in module_info(module).schema.get("x-opsrunner", {}).get("template_files", []):
        value = args.get(key)
        src = template_source(value, search_dirs) if isinstance(value, str) and not has_template(value) else None
        if src is None:
            continue  # templated (rendered at run time), or missing (reported with the local paths)
        where = args.at(key) if isinstance(args, PosDict) else pos
        for found in check_file(src, include_path(search_dirs, src)):
            problems.append(Problem(SourcePos(found.file, found.line, 1 if found.line else 0),
                                    f"{found.message} (in the {module} {key} at {where})", f"{path}.{key}"))
    return problems


def _vars_file_problems(module: str, args: dict[str, Any], pos: SourcePos, path: str,
                        search_dirs: list[Path]) -> list[Problem]:
    """include_vars of a file named without a template reads it now, as a play's vars_files: a
    missing or broken file is bad input before any host is touched (a templated name is checked
    once rendered, preflight.py)."""
    name = args.get("file")
    if module != "include_vars" or not isinstance(name, str) or has_template(name):
        return []
    return vars_file_problems(name, search_dirs, args.at("file") if isinstance(args, PosDict) else pos,
                              f"{path}.file")


def _key_values(text: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """Ansible's `module: key=value key2=value2` form, when every word is a known argument."""
    if "=" not in text:  # no pair at all (most free forms): shlex's split is ~9 us a task
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    known = schema.get("properties", {})
    open_keys = schema.get("additionalProperties") is True  # set_fact: any variable name
    pairs = [w.partition("=") for w in words]
    if not pairs or not all(sep and (key in known or (open_keys and key.isidentifier())) for key, sep, _ in pairs):
        return None
    return {key: value for key, _, value in pairs}  # converted to the declared types by coerce_args


def has_template(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    return False
