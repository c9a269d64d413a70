"""The playbook file and its plays: the loader's top, joining its parts into one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from opsrunner.errors import Problem, SourcePos, TemplateError, ValidationError
from opsrunner.includes import entry_names, first_found, is_dynamic, read_vars_file
from opsrunner.playbook.includes import IncludeLoader
from opsrunner.playbook.keys import PLAY_DEFAULTS, merged_layers
from opsrunner.playbook.model import Play, Playbook
from opsrunner.playbook.roles import RoleLoader
from opsrunner.playbook.task_lists import TaskLoader
from opsrunner.tasks import Block, Node, Task, iter_tasks
from opsrunner.validation import load_schema, schema_problems, suggest
from opsrunner.yamlsource import PosDict, load_yaml_file, positioned

#: What a play holds that is checked on its own (vars: with their files; the task lists).
_PLAY_BODY = frozenset({"vars", "tasks", "handlers"})


class PlaybookLoader(TaskLoader, RoleLoader, IncludeLoader):
    """Builds plays from parsed YAML, collecting every problem instead of stopping at one."""

    def load(self) -> Playbook:
        data = load_yaml_file(self.path)
        if data is None or data == []:  # as ansible-core: nothing to run is an error, not a success
            why = "empty playbook, nothing to do" if data is None else "a playbook must contain at least one play"
            raise ValidationError([Problem(SourcePos(str(self.path)), why)])
        found = schema_problems(data, load_schema("playbook"), str(self.path))
        found = [p for p in found if "unknown key" not in p.message or ".tasks" not in p.key_path]
        self.problems += found
        if found and not isinstance(data, list):
            raise ValidationError(self.problems)
        # A play with a shape problem of its own (`vars: [1]`, `tags: 5`) is reported, not built;
        # a task with one, not built, while the rest of its play is. A play whose only fault is a
        # misspelled key or a bad `strategy` is still built, and thrown away, so that its tasks'
        # problems are told in the same run.
        self.broken_nodes = {node for p in found if (node := _task_node(p.key_path))}
        broken = {p.key_path.split("]")[0] + "]" for p in found
                  if p.key_path.startswith("[") and not _task_node(p.key_path) and not _harmless_to_build(p)}
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
        # The play's own keywords (hosts, serial, timeout, environment, role parameters, ...) are
        # templated at run time; a syntax error in one is bad input, found here like any other.
        self.check_templates({k: v for k, v in raw.items() if k not in _PLAY_BODY}, path, raw)
        self.check_environment(raw, path)
        play_vars, dynamic_files = self.play_vars(raw, path)
        self.tag_pos = {}
        play_tags = self.tags_at(raw)
        self.play_defaults = {k: raw[k] for k in PLAY_DEFAULTS if k in raw}
        self.play_default_pos = {k: raw.at(k) for k in self.play_defaults}
        self.roles, self.role_refs, self.private_roles = [], [], set()
        tasks: list[Node] = []
        for i, ref in enumerate(raw.get("roles") or []):
            tasks += self.role_tasks(ref, raw["roles"].at(i), f"{path}.roles[{i}]", play_tags)
        tasks += self.task_list(raw.get("tasks"), f"{path}.tasks", play_tags, None)
        handlers = self.play_handlers(raw, path, play_tags)
        self.check_notify(iter_tasks(tasks), handlers)
        hosts = raw["hosts"] if isinstance(raw["hosts"], str) else ",".join(raw["hosts"])  # Ansible joins a list
        return Play(
            name=raw.get("name") or hosts,
            hosts=hosts,
            pos=raw.pos,
            hosts_pos=raw.at("hosts"),
            vars=play_vars,
            tasks=tuple(tasks),
            handlers=tuple(handlers),
            serial=raw.get("serial"),
            serial_pos=raw.at("serial"),
            any_errors_fatal=bool(raw.get("any_errors_fatal", False)),
            strategy=str(raw.get("strategy", "linear")),
            max_fail_percentage=raw.get("max_fail_percentage"),
            base_dir=self.base_dir,
            no_log=raw.get("no_log", False),
            no_log_pos=raw.at("no_log"),
            tag_pos=dict(self.tag_pos),
            tags=play_tags,
            timeout=raw.get("timeout"),
            timeout_pos=raw.at("timeout"),
            vars_files=tuple(dynamic_files),
            role_defaults=merged_layers([r.defaults for r in self.roles if r.path not in self.private_roles]),
            role_vars=merged_layers([r.vars for r in self.roles if r.path not in self.private_roles]),
            force_handlers=bool(raw.get("force_handlers", False)),
            gather_facts=bool(raw.get("gather_facts", False)),
        )

    def play_vars(self, raw: PosDict, path: str) -> tuple[dict[str, Any], list[Any]]:
        """The play's vars with its vars_files read, and the templated vars_files left for the run."""
        play_vars = positioned(raw.get("vars"))
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
                play_vars = positioned(play_vars, read_vars_file(found))
            except ValidationError as exc:
                self.problems += exc.problems
            except TemplateError as exc:
                self.fail(vpos, exc.bare_message, key_path)
        return play_vars, dynamic_files

    def play_handlers(self, raw: PosDict, path: str, play_tags: frozenset[str]) -> list[Task]:
        """The handlers of the play's roles (roles: and imported ones), then its own."""
        handlers: list[Node] = []
        for ref, ref_pos, ref_path, ref_tags in self.role_refs:
            handlers += self.role_tasks(ref, ref_pos, ref_path, ref_tags, "handlers")
        handlers += self.task_list(raw.get("handlers"), f"{path}.handlers", play_tags, None)
        if any(isinstance(h, Block) for h in handlers):
            self.fail(raw.pos, "handlers cannot be blocks", f"{path}.handlers")
        return [h for h in handlers if isinstance(h, Task)]

    def check_notify(self, tasks: list[Task], handlers: list[Task]) -> None:
        names = {h.name for h in handlers}
        for handler in handlers:
            listen = handler.kw("listen") or []
            names.update([listen] if isinstance(listen, str) else listen)
        for task in [*tasks, *handlers]:
            for name in task.notify:
                if name not in names and "{{" not in name:
                    self.fail(task.at("notify"), f"notify names unknown handler '{name}'{suggest(name, names)}",
                              "notify")


def load_playbook(path: Path) -> Playbook:
    if not path.exists():
        raise ValidationError([Problem(SourcePos(str(path)), "playbook not found")])
    return PlaybookLoader(path).load()


_TASK_NODE = re.compile(r"\[\d+\](?:\.(?:tasks|handlers|block|rescue|always)\[\d+\])+")


def _task_node(key_path: str) -> str | None:
    """The innermost task-list entry a problem's key path lies in (`[0].tasks[2].block[1]`),
    or None for a problem of the play itself."""
    match = _TASK_NODE.match(key_path)
    return match.group(0) if match else None


def _harmless_to_build(problem: Problem) -> bool:
    """A play-level problem that building the play does not trip over."""
    keyword = problem.key_path.split("]", 1)[1]
    return keyword.count(".") == 1 and (problem.message.startswith("unknown key") or keyword == ".strategy")
