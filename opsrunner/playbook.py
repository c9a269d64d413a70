"""Playbooks: YAML -> validated, frozen Play/Task objects that remember their source position."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsrunner.coercion import coerce_args
from opsrunner.errors import Problem, SourcePos, TemplateError, ValidationError
from opsrunner.includes import (
    INCLUDE_KEYWORDS,
    INCLUDE_ROLE_KEYS,
    INCLUDE_TASK_KEYS,
    IncludeLoader,
    entry_names,
    first_found,
    is_dynamic,
    read_vars_file,
)
from opsrunner.modules.registry import module_info, module_names
from opsrunner.tasks import Block, Node, Role, Task, iter_tasks
from opsrunner.templating import check_syntax
from opsrunner.validation import load_schema, schema_problems, suggest
from opsrunner.yamlsource import PosDict, PosList, load_yaml_file

# Task, Role and Block live in tasks.py, which modules/ imports too; re-exported for callers.
__all__ = ["Block", "Node", "Play", "Playbook", "Role", "Task", "iter_tasks", "load_playbook",
           "resolve_playbook_path"]

BLOCK_KEYS = frozenset({"block", "rescue", "always"})
TASK_KEYWORDS = frozenset(load_schema("playbook")["$defs"]["task"]["properties"]) - BLOCK_KEYS
CONDITION_KEYS = ("when", "until", "changed_when", "failed_when")
#: Keywords a block (or, where they exist, a play) passes down to its tasks, as in Ansible.
INHERITED = ("ignore_errors", "no_log", "become", "become_user", "become_method", "environment", "check_mode",
             "diff", "run_once", "delegate_to")
PLAY_DEFAULTS = ("become", "become_user", "become_method", "environment")
BLOCK_KEYWORDS = frozenset({"name", "when", "tags", "vars", *INHERITED}) | BLOCK_KEYS


@dataclass(frozen=True)
class Play:
    name: str
    hosts: str
    pos: SourcePos
    vars: dict[str, Any]
    tasks: tuple[Node, ...]
    handlers: tuple[Task, ...]
    serial: int | str | list[int | str] | None = None
    any_errors_fatal: bool = False
    force_handlers: bool = False
    gather_facts: bool = False
    max_fail_percentage: float | None = None
    base_dir: Path = Path(".")
    vars_files: tuple[Any, ...] = ()  # templated entries, resolved per host at run time
    role_defaults: dict[str, Any] = field(default_factory=dict)
    no_log: bool | str = False
    timeout: float | str | None = None
    role_vars: dict[str, Any] = field(default_factory=dict)  # visible to every task of the play


@dataclass(frozen=True)
class Playbook:
    path: Path
    plays: tuple[Play, ...]


def resolve_playbook_path(name: str, cwd: Path) -> Path:
    """A name that is not a path is looked up in the current directory, then in playbooks/."""
    candidate = Path(name)
    if candidate.is_absolute() or candidate.exists():
        return candidate
    if "/" not in name:
        for folder in (cwd, cwd / "playbooks"):
            if (folder / name).exists():
                return folder / name
    return candidate


class _Loader(IncludeLoader):
    """Builds plays from parsed YAML, collecting every problem instead of stopping at one."""

    def __init__(self, path: Path, importers: tuple[Path, ...] = ()) -> None:
        self.path = path
        self.importers = (*importers, path.resolve())  # import_playbook chain, to refuse cycles
        self.file_stack = [path]
        self.role_refs: list[tuple[Any, SourcePos, str, frozenset[str]]] = []
        self.private_roles: set[Path] = set()  # include_role: its vars stay with its own tasks
        self.base_dir = path.parent.resolve()
        self.problems: list[Problem] = []
        self.roles: list[Role] = []
        self.current_role: Role | None = None
        self.play_defaults: dict[str, Any] = {}

    def fail(self, pos: SourcePos, message: str, key_path: str = "") -> None:
        self.problems.append(Problem(pos, message, key_path))

    def load(self) -> Playbook:
        data = load_yaml_file(self.path)
        if data is None:
            data = PosList()
        found = schema_problems(data, load_schema("playbook"), str(self.path))
        found = [p for p in found if "unknown key" not in p.message or ".tasks" not in p.key_path]
        self.problems += found
        if found and not isinstance(data, list):
            raise ValidationError(self.problems)
        # A play with a shape problem (`vars: [1]`, `tags: 5`) is reported, not built.
        broken = {p.key_path.split("]")[0] + "]" for p in found if p.key_path.startswith("[")}
        plays = []
        for index, raw in enumerate(data):
            if f"[{index}]" in broken:
                continue
            if isinstance(raw, PosDict) and isinstance(raw.get("import_playbook"), str):
                plays += self.import_playbook(raw, f"[{index}]")
            elif isinstance(raw, PosDict) and isinstance(raw.get("hosts"), str | list):
                plays.append(self.play(raw, f"[{index}]"))
        if self.problems:  # a role's files are read for its tasks and again for its handlers: said once
            raise ValidationError(list(dict.fromkeys(self.problems)))
        return Playbook(self.path, tuple(plays))

    def play(self, raw: PosDict, path: str) -> Play:
        play_vars = dict(raw.get("vars") or {})
        self.check_templates(raw.get("vars") or {}, f"{path}.vars")
        dynamic_files: list[Any] = []
        for i, entry in enumerate(raw.get("vars_files") or []):
            vpos, key_path = raw["vars_files"].at(i), f"{path}.vars_files[{i}]"
            if is_dynamic(entry):
                dynamic_files.append(entry)  # templated: resolved per host when the play runs
                continue
            found = first_found(entry, self.base_dir)
            if found is None:
                self.fail(vpos, f"vars file not found: {' or '.join(entry_names(entry))}", key_path)
                continue
            try:
                play_vars.update(read_vars_file(found))
            except ValidationError as exc:
                self.problems += exc.problems
            except TemplateError as exc:
                self.fail(vpos, exc.bare_message, key_path)
        play_tags = _tags(raw.get("tags"))
        self.play_defaults = {k: raw[k] for k in PLAY_DEFAULTS if k in raw}
        self.roles, self.role_refs, self.private_roles = [], [], set()
        tasks: list[Node] = []
        for i, ref in enumerate(raw.get("roles") or []):
            tasks += self.role_tasks(ref, raw["roles"].at(i), f"{path}.roles[{i}]", play_tags)
        tasks += self.task_list(raw.get("tasks"), f"{path}.tasks", play_tags, None)
        handlers: list[Node] = []
        for ref, ref_pos, ref_path, ref_tags in self.role_refs:  # roles: and imported roles
            handlers += self.role_tasks(ref, ref_pos, ref_path, ref_tags, "handlers")
        handlers += self.task_list(raw.get("handlers"), f"{path}.handlers", play_tags, None)
        if any(isinstance(h, Block) for h in handlers):
            self.fail(raw.pos, "handlers cannot be blocks", f"{path}.handlers")
        handler_tasks = [h for h in handlers if isinstance(h, Task)]
        self.check_notify(iter_tasks(tasks), handler_tasks)
        hosts = raw["hosts"] if isinstance(raw["hosts"], str) else ",".join(raw["hosts"])  # Ansible joins a list
        return Play(
            name=raw.get("name") or hosts,
            hosts=hosts,
            pos=raw.pos,
            vars=play_vars,
            tasks=tuple(tasks),
            handlers=tuple(handler_tasks),
            serial=raw.get("serial"),
            any_errors_fatal=bool(raw.get("any_errors_fatal", False)),
            max_fail_percentage=raw.get("max_fail_percentage"),
            base_dir=self.base_dir,
            no_log=raw.get("no_log", False),
            timeout=raw.get("timeout"),
            vars_files=tuple(dynamic_files),
            role_defaults=_merge([r.defaults for r in self.roles if r.path not in self.private_roles]),
            role_vars=_merge([r.vars for r in self.roles if r.path not in self.private_roles]),
            force_handlers=bool(raw.get("force_handlers", False)),
            gather_facts=bool(raw.get("gather_facts", False)),
        )

    def find_role(self, name: str) -> Path | None:
        for folder in (self.base_dir / "roles", Path.cwd() / "roles", self.base_dir.parent / "roles"):
            if (folder / name).is_dir():
                return folder / name
        return None

    def role_tasks(self, ref: Any, pos: SourcePos, path: str, play_tags: frozenset[str],
                   kind: str = "tasks", inherited: dict[str, Any] | None = None) -> list[Node]:
        name = ref if isinstance(ref, str) else ref["role"]
        params = {} if isinstance(ref, str) else dict(ref.get("vars") or {})
        tags = play_tags | (frozenset() if isinstance(ref, str) else _tags(ref.get("tags")))
        role_dir = self.find_role(name)
        if role_dir is None:
            if kind == "tasks":
                self.fail(pos, f"role '{name}' not found (searched roles/ next to the playbook "
                          "and in the current directory)", path)
            return []
        role = Role(name, role_dir, self.role_mapping(role_dir / "defaults/main.yml"),
                    self.role_mapping(role_dir / "vars/main.yml"))
        if kind == "tasks":
            self.roles.append(role)
            self.role_refs.append((ref, pos, path, play_tags))
        entry = "main" if isinstance(ref, str) or kind != "tasks" else ref.get("tasks_from", "main")
        main = role_dir / kind / f"{entry}.yml"
        if not main.exists():
            if kind == "tasks":
                self.fail(pos, f"role '{name}' has no tasks/{entry}.yml", path)
            return []
        try:
            raw = load_yaml_file(main)
        except ValidationError as exc:
            self.problems += exc.problems
            return []
        if raw is None:
            return []
        found = schema_problems(raw, load_schema("playbook")["$defs"]["task_list"] | {
            "$defs": load_schema("playbook")["$defs"]}, str(main))
        self.problems += found
        if found or not isinstance(raw, list):
            return []
        self.current_role, outer_role = role, self.current_role
        self.file_stack.append(main)
        try:
            return self.task_list(raw, kind, tags, role, params, base_dir=role_dir, inherited=inherited)
        finally:
            self.current_role = outer_role
            self.file_stack.pop()

    def role_mapping(self, file: Path) -> dict[str, Any]:
        if not file.exists():
            return {}
        try:
            data = load_yaml_file(file)
        except ValidationError as exc:
            self.problems += exc.problems
            return {}
        if data is not None and not isinstance(data, dict):
            self.fail(SourcePos(str(file)), "must hold a mapping of variables")
            return {}
        self.check_templates(data or {}, "")
        return dict(data or {})

    def task_list(self, raw: Any, path: str, tags: frozenset[str], role: Role | None,
                  params: dict[str, Any] | None = None, base_dir: Path | None = None,
                  inherited: dict[str, Any] | None = None) -> list[Node]:
        out: list[Node] = []
        for i, item in enumerate(raw or []):
            if not isinstance(item, PosDict):
                continue
            args = (f"{path}[{i}]", tags, role, params or {}, base_dir or self.base_dir, inherited or {})
            if any(k in item for k in INCLUDE_TASK_KEYS):
                node = self.include_tasks(item, *args)
            elif any(k in item for k in INCLUDE_ROLE_KEYS):
                node = self.include_role(item, f"{path}[{i}]", tags, inherited or {})
            else:
                node = self.block(item, *args) if BLOCK_KEYS & set(item) else self.task(item, *args)
            if node:
                out.append(node)
        return out

    def make_block(self, raw: Any, nodes: list[Any], name: str, tags: frozenset[str],
                   inherited: dict[str, Any]) -> tuple[Block, frozenset[str], dict[str, Any]]:
        """An include as a block: its keywords apply to every included task, as import_* does."""
        self.check_templates({k: v for k, v in raw.items() if k in INCLUDE_KEYWORDS}, name, raw)
        block = Block(str(raw.get("name") or name), raw.pos, tuple(nodes))
        return block, tags | _tags(raw.get("tags")), _inherit(inherited, raw)

    def block(self, raw: PosDict, path: str, tags: frozenset[str], role: Role | None,
              params: dict[str, Any], base_dir: Path, inherited: dict[str, Any]) -> Block | None:
        for key in raw:
            if key not in BLOCK_KEYWORDS:
                self.fail(raw.at(key), f"'{key}' is not allowed on a block (only "
                          f"{', '.join(sorted(BLOCK_KEYWORDS))})", f"{path}.{key}")
        if "block" not in raw:
            self.fail(raw.pos, "rescue/always need a block", path)
            return None
        self.check_templates({k: v for k, v in raw.items() if k not in BLOCK_KEYS}, path, raw)
        merged = _inherit(inherited, raw)
        sub_tags = tags | _tags(raw.get("tags"))
        lists = {key: tuple(self.task_list(raw.get(key), f"{path}.{key}", sub_tags, role, params, base_dir, merged))
                 for key in ("block", "rescue", "always")}
        return Block(str(raw.get("name") or "block"), raw.pos, lists["block"], lists["rescue"], lists["always"])

    def task(self, raw: PosDict, path: str, tags: frozenset[str], role: Role | None,
             params: dict[str, Any], base_dir: Path, inherited: dict[str, Any] | None = None) -> Task | None:
        known = set(module_names())
        modules = [k for k in raw if k not in TASK_KEYWORDS]
        for key in modules:
            if key not in known:
                hint = suggest(key, [*known, *TASK_KEYWORDS])
                self.fail(raw.at(key), f"unknown module or keyword '{key}'{hint}", f"{path}.{key}")
        modules = [k for k in modules if k in known]
        if len(modules) != 1:
            if not modules and all(k in TASK_KEYWORDS for k in raw):
                self.fail(raw.pos, "task has no module (e.g. shell:, command:, deploy_code:)", path)
            elif len(modules) > 1:
                self.fail(raw.pos, f"task has more than one module: {', '.join(modules)}", path)
            return None
        module = modules[0]
        args = self.module_args(module, raw[module], raw.at(module), f"{path}.{module}")
        keywords = {k: v for k, v in _inherit(self.play_defaults, PosDict(_inherit(inherited or {}, raw))).items()
                    if k not in ("name", "tags")}
        # Conditions are bare expressions (a literal '{{' inside one is fine): checked below.
        self.check_templates({k: v for k, v in raw.items() if k != module and k not in CONDITION_KEYS}, path, raw)
        self.check_templates(args, f"{path}.{module}")
        for key in CONDITION_KEYS:
            for expr in _as_list(raw.get(key)):
                if isinstance(expr, str):
                    err = check_syntax("{{ (" + _bare(expr) + ") }}")
                    if err:
                        self.fail(raw.at(key), err, f"{path}.{key}")
        return Task(
            name=str(raw.get("name") or f"{module}"),
            module=module,
            args=args,
            pos=raw.pos,
            keywords=keywords,
            tags=tags | _tags(raw.get("tags")),
            role=role,
            role_params=params,
            base_dir=base_dir if role is None else self.base_dir,
        )

    def module_args(self, module: str, raw: Any, pos: SourcePos, path: str) -> dict[str, Any]:
        info = module_info(module)
        if raw is None:
            raw = PosDict()
            raw.pos, raw.key_pos = pos, {}
        kv = _key_values(raw, info.schema) if isinstance(raw, str) else None
        if kv is not None:
            args: Any = PosDict(kv)
            args.pos, args.key_pos = pos, dict.fromkeys(kv, pos)
        elif isinstance(raw, str) and info.free_form:
            args = PosDict({info.free_form: raw})
            args.pos, args.key_pos = pos, {info.free_form: pos}
        else:
            args = raw
        if isinstance(args, dict):
            coerced, refusals = coerce_args(args, info.schema, skip=_has_template)
            args.update(coerced)  # in place: a PosDict keeps its positions
            for refusal in refusals:
                top = refusal.arg.split(".")[0].split("[")[0]
                self.fail(args.at(top) if isinstance(args, PosDict) else pos, refusal.message(module),
                          f"{path}.{refusal.arg}")
            if refusals:
                return {}
        for problem in schema_problems(args, info.schema, str(self.path), root=args, fallback=pos):
            if "{{" in problem.message:
                continue  # a templated value: checked again after rendering, at run time
            self.problems.append(Problem(problem.pos, problem.message,
                                         f"{path}{'.' + problem.key_path if problem.key_path else ''}"))
        if not isinstance(args, dict):
            return {}
        self.check_local_paths(module, args, pos, path)
        return args

    def check_local_paths(self, module: str, args: dict[str, Any], pos: SourcePos, path: str) -> None:
        """Controller-side files a module reads must exist (templated paths are checked at run time)."""
        for key in module_info(module).schema.get("x-opsrunner", {}).get("local_paths", []):
            value = args.get(key)
            if not isinstance(value, str) or "{{" in value or (Path(value).expanduser().is_absolute() \
                    and Path(value).expanduser().exists()):
                continue
            dirs = ([self.current_role.path / "files", self.current_role.path / "templates", self.current_role.path]
                    if self.current_role else [])
            dirs.append(self.base_dir)
            if not any((d / Path(value).expanduser()).exists() for d in dirs):
                where = ", ".join(str(d) for d in dirs)
                self.fail(args.at(key) if isinstance(args, PosDict) else pos,
                          f"{module} {key} '{value}' not found (looked in {where})", f"{path}.{key}")

    def check_templates(self, value: Any, path: str, parent: Any = None, key: Any = None) -> None:
        if isinstance(value, str):
            err = check_syntax(value)
            if err:
                pos = parent.at(key) if isinstance(parent, (PosDict, PosList)) and key is not None \
                    else getattr(parent, "pos", SourcePos(str(self.path)))
                self.fail(pos, err, path)
        elif isinstance(value, dict):
            for k, v in value.items():
                holder = value if isinstance(value, PosDict) else parent
                self.check_templates(v, f"{path}.{k}" if path else k, holder, k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.check_templates(v, f"{path}[{i}]", value if isinstance(value, PosList) else parent, i)

    def check_notify(self, tasks: list[Task], handlers: list[Task]) -> None:
        names = {h.name for h in handlers}
        for handler in handlers:
            listen = handler.kw("listen") or []
            names.update([listen] if isinstance(listen, str) else listen)
        for task in [*tasks, *handlers]:
            for name in task.notify:
                if name not in names and "{{" not in name:
                    self.fail(task.pos, f"notify names unknown handler '{name}'{suggest(name, names)}",
                              f"{task.name}.notify")


def _key_values(text: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """Ansible's `module: key=value key2=value2` form, when every word is a known argument."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError:
        return None
    known = schema.get("properties", {})
    pairs = [w.partition("=") for w in words]
    if not pairs or not all(sep and key in known for key, sep, _ in pairs):
        return None
    return {key: value for key, _, value in pairs}  # converted to the declared types by coerce_args


def _bare(expr: str) -> str:
    """A condition without its optional `{{ }}`, exactly as templating.evaluate reads it."""
    text = expr.strip()
    return text[2:-2] if text.startswith("{{") and text.endswith("}}") else text


def _has_template(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return False


def _inherit(outer: dict[str, Any], raw: PosDict) -> dict[str, Any]:
    """A task's keywords with its enclosing blocks' applied: `when` conditions all apply,
    `vars` merge (inner wins), `ignore_errors` and `no_log` are the defaults."""
    own = {k: v for k, v in raw.items() if k in TASK_KEYWORDS}
    merged = {**{k: v for k, v in outer.items() if k in INHERITED}, **own}
    when = _as_list(outer.get("when")) + _as_list(own.get("when"))
    if when:
        merged["when"] = when
    if isinstance(outer.get("environment"), dict) and isinstance(own.get("environment"), dict):
        merged["environment"] = {**outer["environment"], **own["environment"]}  # as Ansible: both apply
    if outer.get("vars") or own.get("vars"):
        merged["vars"] = {**(outer.get("vars") or {}), **(own.get("vars") or {})}
    return merged


def _merge(layers: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        out.update(layer)
    return out


def _tags(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(t.strip() for t in value.split(",") if t.strip())
    return frozenset(str(v) for v in value)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def load_playbook(path: Path) -> Playbook:
    if not path.exists():
        raise ValidationError([Problem(SourcePos(str(path)), "playbook not found")])
    return _Loader(path).load()
