"""What a run's history row says of it before its play begins (api.run builds it here): the
command line, the extra vars and the options, masked with every secret-name pattern the run's
files configure, and the row of a run that ended before its play began.

The row is written once the playbook is read: a `secret_name_patterns` of a play, a role or a
task hides the -e values it names in the recorded command line and extra vars, as the
inventory's and an -e's do. A playbook that does not load is read as plain YAML for the
patterns it writes, and so are the vars_files and roles it names, so the row of a run refused
for bad input hides them too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.secrets import Masker, chosen_patterns

if TYPE_CHECKING:
    from opsrunner.history.recorder import HistoryRecorder, PlayRun
    from opsrunner.playbook import Playbook
    from opsrunner.playrequest import PlayRequest, RunInputs
    from opsrunner.selection import RunOptions


def playbook_var_layers(playbook: Playbook | None) -> list[Mapping[str, Any]]:
    """The variables a playbook writes itself: its plays', roles' and tasks' (blocks' are merged
    into their tasks), where a `secret_name_patterns` may be set."""
    from opsrunner.playbook import iter_tasks

    layers: list[Mapping[str, Any]] = []
    for play in playbook.plays if playbook is not None else ():
        layers += [play.vars, play.role_vars, play.role_defaults]
        for task in [*iter_tasks(play.tasks), *play.handlers]:
            layers += [task.kw("vars") or {}, task.role_params]
            layers += [task.role.vars, task.role.defaults] if task.role is not None else []
    return layers


def patterns_of(layers: Iterable[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """The pattern lists `layers` choose, each once."""
    return list(dict.fromkeys(c for c in (chosen_patterns(layer) for layer in layers) if c))


def written_patterns(path: Path) -> list[tuple[str, ...]]:
    """Every `secret_name_patterns` list a playbook's files write, at any depth: the patterns
    of a playbook that does not load. Its own file read as plain YAML, the vars_files it names
    (literal names, relative to it) and the vars and defaults of the roles it names (searched
    as the loader searches them); a file that is not there or is no YAML gives none."""
    document = _yaml_or_none(path)
    found = _patterns_in(document)
    for named in _files_named(document, path.parent.resolve()):
        found += _patterns_in(_yaml_or_none(named))
    return list(dict.fromkeys(found))


def _yaml_or_none(path: Path) -> Any:
    from opsrunner.yamlsource import load_yaml_file

    try:
        return load_yaml_file(path)
    except Exception:  # not there, not YAML: it configures nothing that can be told
        return None


def _mappings(document: Any) -> Iterator[Mapping[Any, Any]]:
    """Every mapping in a YAML document, at any depth."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, Mapping):
            yield value
            stack += list(value.values())
        elif isinstance(value, list):
            stack += value


def _patterns_in(document: Any) -> list[tuple[str, ...]]:
    return [chosen for mapping in _mappings(document) if (chosen := chosen_patterns(mapping))]


#: The keys that name a role in a task: its name is their `name`.
_ROLE_TASKS = ("import_role", "include_role", "ansible.builtin.import_role", "ansible.builtin.include_role")


def _files_named(document: Any, base_dir: Path) -> list[Path]:
    """The files of variables a playbook's YAML names that exist: its vars_files entries (of a
    first-found list, each) and its roles' (`roles:`, import_role, include_role) vars/main.yml
    and defaults/main.yml."""
    from opsrunner.playbook.roles import role_folders

    files: list[Path] = []
    roles: list[Any] = []
    for mapping in _mappings(document):
        files += _vars_files(mapping.get("vars_files"), base_dir)
        refs = mapping.get("roles")
        roles += [ref.get("role", ref.get("name")) if isinstance(ref, Mapping) else ref
                  for ref in (refs if isinstance(refs, list) else [])]
        roles += [task.get("name") for key in _ROLE_TASKS if isinstance(task := mapping.get(key), Mapping)]
    for name in (r for r in roles if isinstance(r, str)):
        found = next((folder / name for folder in role_folders(base_dir) if _there(folder / name, Path.is_dir)),
                     None)
        files += [found / "vars/main.yml", found / "defaults/main.yml"] if found is not None else []
    return [file for file in dict.fromkeys(files) if _there(file, Path.is_file)]


def _vars_files(entries: Any, base_dir: Path) -> list[Path]:
    """The files a play's `vars_files` names literally, relative to the playbook's folder."""
    from opsrunner.includes import entry_names

    names = [name for entry in entries for name in entry_names(entry)] if isinstance(entries, list) else []
    files = []
    for name in (n for n in names if "{" not in n):  # a templated name is known only as the play runs
        try:
            files.append(base_dir / Path(name).expanduser())
        except RuntimeError:  # `~nosuchuser/x.yml`
            continue
    return files


def _there(path: Path, kind: Callable[[Path], bool]) -> bool:
    """Whether `path` is there as a file (not a device: `/dev/zero` would never end) or a
    folder, per `kind`; a name no file can have (a NUL, too long) is not."""
    try:
        return kind(path)
    except (OSError, ValueError):
        return False


def learn_playbook_patterns(masker: Masker, playbook: Playbook | None, path: Path,
                            extra_vars: Mapping[str, Any]) -> None:
    """Teach `masker` the secret-name patterns the playbook configures (its loaded plays, else
    its files read as YAML: written_patterns), and the -e values they make secret: before the run's row is written."""
    chosen = patterns_of(playbook_var_layers(playbook)) if playbook is not None else written_patterns(path)
    for patterns in dict.fromkeys(chosen):
        masker.add_vars(extra_vars, patterns)
    masker.add_assigned(extra_vars)  # `-e 'env={"db_cred": "x"}'`: by every pattern now known


def history_options(request: PlayRequest) -> dict[str, Any]:
    """The run's options as its history row records them."""
    from opsrunner.selection import split_tags

    return {"limit": request.limit, "tags": sorted(split_tags(request.tags)),
            "skip_tags": sorted(split_tags(request.skip_tags)), "diff": request.diff, "forks": request.forks}


def play_run(request: PlayRequest, playbook: Path, extra_vars: dict[str, Any], run_id: str | None,
             started: float, options: RunOptions | None, loaded: Playbook | None = None) -> PlayRun:
    from opsrunner.history.groups import run_group_for
    from opsrunner.history.recorder import PlayRun

    host_slice = options.host_slice if options is not None else None
    return PlayRun(playbook, [str(i) for i in request.inventory], extra_vars, request.command_line(),
                   schedule=request.schedule, run_id=run_id, check_mode=request.check,
                   options=history_options(request), started=started,
                   slice_text=str(host_slice) if host_slice else request.host_slice or None,
                   run_group=run_group_for(request.run_group, host_slice, playbook),
                   reads=files_read(request, playbook, loaded))


def files_read(request: PlayRequest, path: Path, playbook: Playbook | None) -> tuple[Path, ...]:
    """What the run reads besides its playbook, for its git state (which of them git does not
    track): its task files and roles, its inventories, and the vars, templates and files
    folders beside the playbook and the inventories. Paths that do not exist are left out."""
    from opsrunner.playbook import iter_tasks
    from opsrunner.project import default_inventory

    found: set[Path] = set()
    for play in playbook.plays if playbook is not None else ():
        for task in [*iter_tasks(play.tasks), *play.handlers]:
            found.add(Path(task.pos.file))
            if task.role is not None:
                found.add(task.role.path)
    sources = [Path(str(i)) for i in request.inventory] or [default_inventory(Path.cwd())]
    found.update(sources)
    for folder in {path.parent, *(s.parent for s in sources)}:
        found.update(folder / name for name in ("group_vars", "host_vars", "vars", "templates", "files"))
    return tuple(sorted(p for p in found if p.exists()))


def recorder(request: PlayRequest, inputs: RunInputs, started: float) -> HistoryRecorder:
    from opsrunner.history.recorder import recorder_for_play

    play = play_run(request, inputs.playbook.path, inputs.extra_vars, inputs.options.run_id, started, inputs.options,
                    inputs.playbook)
    return recorder_for_play(play, request.history_path, masker=inputs.masker, required=request.history_required)


class Unstarted:
    """What is known of a run until its play begins, to record it if it ends there: when it
    started, its extra vars and the secrets found so far, its options once checked."""

    def __init__(self, request: PlayRequest, run_id: str | None) -> None:
        self.request = request
        self.run_id = run_id
        self.started = time.time()
        self.extra_vars: dict[str, Any] = {}
        self.masker = Masker()
        self.options: RunOptions | None = None

    def learn(self, extra_vars: dict[str, Any], masker: Masker) -> None:
        self.extra_vars, self.masker = extra_vars, masker

    def record(self, code: int, reason: str, outcome: str | None) -> str | None:
        """The run's history row, closed with `code`; None where the run is not recorded."""
        from opsrunner.history.recorder import record_unstarted
        from opsrunner.project import resolve_playbook

        if self.run_id is None:
            return None
        playbook = resolve_playbook(str(self.request.playbook), Path.cwd())
        play = play_run(self.request, playbook, self.extra_vars, self.run_id, self.started, self.options)
        return record_unstarted(play, self.request.history_path, code, reason, masker=self.masker, outcome=outcome)


class NoHosts:
    """The inventory of a run whose inventory did not load: its extra vars' secrets alone."""

    hosts: dict[str, Any] = {}

    def var_layers(self, hostname: str) -> list[Mapping[str, Any]]:
        return []
