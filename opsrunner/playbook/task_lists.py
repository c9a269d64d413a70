"""Task lists at load time: tasks, blocks (block/rescue/always) and the keywords they pass down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsrunner.errors import SourcePos
from opsrunner.modules.registry import module_info, module_names
from opsrunner.playbook.keys import (
    BLOCK_KEYS,
    BLOCK_KEYWORDS,
    CONDITION_KEYS,
    INCLUDE_KEYWORDS,
    INCLUDE_ROLE_KEYS,
    INCLUDE_TASK_KEYS,
    TASK_KEYWORDS,
    as_list,
    inherit,
)
from opsrunner.playbook.module_args import expression_args, module_args
from opsrunner.playbook.state import LoaderState
from opsrunner.tasks import Block, Node, Role, Task
from opsrunner.templating import is_template
from opsrunner.validation import suggest
from opsrunner.yamlsource import PosDict, PosList


class TaskLoader(LoaderState):
    """Builds the nodes of a task list; includes (includes.py) and roles (roles.py) come back here."""

    def task_list(self, raw: Any, path: str, tags: frozenset[str], role: Role | None,
                  params: dict[str, Any] | None = None, base_dir: Path | None = None,
                  inherited: dict[str, Any] | None = None) -> list[Node]:
        out: list[Node] = []
        for i, item in enumerate(raw or []):
            if not isinstance(item, PosDict) or f"{path}[{i}]" in self.broken_nodes:
                continue
            self.check_environment(item, f"{path}[{i}]")
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
        return block, tags | self.tags_at(raw), inherit(inherited, raw)

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
        merged = inherit(inherited, raw)
        sub_tags = tags | self.tags_at(raw)
        lists = {key: tuple(self.task_list(raw.get(key), f"{path}.{key}", sub_tags, role, params, base_dir, merged))
                 for key in ("block", "rescue", "always")}
        return Block(str(raw.get("name") or "block"), raw.pos, lists["block"], lists["rescue"], lists["always"])

    def task(self, raw: PosDict, path: str, tags: frozenset[str], role: Role | None,
             params: dict[str, Any], base_dir: Path, inherited: dict[str, Any] | None = None) -> Task | None:
        module = self.task_module(raw, path)
        if module is None:
            return None
        role = self.current_role
        # Where the module itself will look at run time (Task.search_dirs): the role's folder
        # for the module's files (templates/, files/, vars/), the role, the playbook's folder.
        dirs = [role.path / module_info(module).local_folder, role.path] if role else []
        args, problems, args_checked = module_args(module, raw[module], raw.at(module), f"{path}.{module}",
                                                   str(self.path), [*dirs, self.base_dir], raw.get("args"))
        self.problems += problems
        outer = inherited or {}
        keywords = {k: v for k, v in inherit(self.play_defaults, PosDict(inherit(outer, raw))).items()
                    if k not in ("name", "tags", "args")}
        # Conditions are bare expressions (a literal '{{' inside one is fine): checked below.
        self.check_templates({k: v for k, v in raw.items() if k != module and k not in CONDITION_KEYS}, path, raw)
        self.check_arg_templates(module, args, f"{path}.{module}", raw.at(module))
        for key in CONDITION_KEYS:
            for expr in as_list(raw.get(key)):
                self.check_expression(expr, raw.at(key), f"{path}.{key}")
        return Task(
            name=str(raw.get("name") or f"{module}"),
            module=module,
            args=args,
            pos=raw.pos,
            keywords=keywords,
            tags=tags | self.tags_at(raw),
            role=role,
            role_params=params,
            base_dir=base_dir if role is None else self.base_dir,
            key_pos={k: raw.at(k) for k in raw if k in keywords},
            play_key_pos={k: pos for k, pos in self.play_default_pos.items() if k not in raw and k not in outer},
            args_checked=args_checked,
        )

    def task_module(self, raw: PosDict, path: str) -> str | None:
        """The task's one module; every key that is neither a module nor a keyword is a problem."""
        known = set(module_names())
        modules = [k for k in raw if k not in TASK_KEYWORDS]
        for key in modules:
            if key not in known:
                hint = suggest(key, [*known, *TASK_KEYWORDS])
                self.fail(raw.at(key), f"unknown module or keyword '{key}'{hint}", f"{path}.{key}")
        modules = [k for k in modules if k in known]
        if len(modules) == 1:
            return modules[0]
        if not modules and all(k in TASK_KEYWORDS for k in raw):
            self.fail(raw.pos, "task has no module (e.g. shell:, command:, deploy_code:)", path)
        elif len(modules) > 1:
            self.fail(raw.pos, f"task has more than one module: {', '.join(modules)}", path)
        return None

    def check_arg_templates(self, module: str, args: dict[str, Any], path: str, pos: SourcePos) -> None:
        """Templates in the arguments must parse. An argument the module evaluates as a bare
        expression (`assert: that:`, `debug: var:`) is rendered first when it holds a template,
        so it is checked as one; otherwise it must parse as an expression."""
        expressions = expression_args(module)
        for key, value in args.items():
            self.check_templates(value, f"{path}.{key}", args, key)
            if key not in expressions:
                continue
            for i, expr in enumerate(as_list(value)):
                if isinstance(expr, str) and not is_template(expr):
                    if isinstance(value, list):
                        self.check_expression(expr, value.at(i) if isinstance(value, PosList) else pos,
                                              f"{path}.{key}[{i}]")
                    else:
                        self.check_expression(expr, args.at(key) if isinstance(args, PosDict) else pos,
                                              f"{path}.{key}")
