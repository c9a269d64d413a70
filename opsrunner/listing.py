"""--list-hosts, --list-tasks and --list-tags: what a playbook will do and where, without connecting."""

from __future__ import annotations

from opsrunner.errors import ValidationError
from opsrunner.inventory import Inventory
from opsrunner.playbook import Playbook, iter_tasks
from opsrunner.selection import RunOptions, select_play_hosts, tags_problems, task_tags
from opsrunner.tagrules import tags_selected


def list_hosts(playbook: Playbook, inventory: Inventory, options: RunOptions) -> str:
    lines = [f"playbook: {playbook.path}", ""]
    for i, play in enumerate(playbook.plays, 1):
        hosts = select_play_hosts(play, inventory, options)
        lines.append(f"  play #{i} ({play.hosts}): {play.name}"
                     f"\tHOSTS ({len(hosts)}):")
        lines += [f"    {h}" for h in hosts]
        lines.append("")
    return "\n".join(lines) + "\n"


def list_tasks(playbook: Playbook, options: RunOptions) -> str:
    """The tasks a run selects, their tags rendered as the run renders them; tags that cannot
    be rendered are bad input here as in the run (as ansible-playbook --list-tasks, for every play)."""
    problems = [p for play in playbook.plays for p in tags_problems(play, options.extra_vars)]
    if problems:
        raise ValidationError(problems)
    lines = [f"playbook: {playbook.path}", ""]
    for i, play in enumerate(playbook.plays, 1):
        serial = f"  serial={play.serial}" if play.serial else ""
        lines.append(f"  play #{i} ({play.hosts}): {play.name}{serial}")
        for task in iter_tasks(play.tasks):
            task_tag_names = task_tags(task, play, options.extra_vars)
            if not tags_selected(task_tag_names, options.tags, options.skip_tags):
                continue
            role = f"{task.role.name} : " if task.role else ""
            tags = f"\tTAGS: [{', '.join(sorted(task_tag_names))}]" if task_tag_names else ""
            timeout = f"  timeout={task.kw('timeout')}" if task.kw("timeout") is not None else ""
            lines.append(f"    {role}{task.name}  [{task.module}]{timeout}{tags}")
        for handler in play.handlers:
            lines.append(f"    handler: {handler.name}  [{handler.module}]")
        lines.append("")
    return "\n".join(lines) + "\n"


def list_tags(playbook: Playbook, options: RunOptions) -> str:
    """Each play's own tags and those of the tasks a run selects (inherited ones included, as
    the run renders them), as ansible-playbook --list-tags prints them."""
    problems = [p for play in playbook.plays for p in tags_problems(play, options.extra_vars)]
    if problems:
        raise ValidationError(problems)
    # As ansible-playbook: without -t or --skip-tags, `never` tasks' tags are listed too (finding
    # the tags that must be asked for is what --list-tags is for).
    tags = options.tags or (options.tags if options.skip_tags else frozenset({"never", "all"}))
    lines = [f"playbook: {playbook.path}", ""]
    for i, play in enumerate(playbook.plays, 1):
        found: set[str] = set(play.tags)  # a play's own tags are listed whatever its tasks
        for task in iter_tasks(play.tasks):
            names = task_tags(task, play, options.extra_vars)
            if tags_selected(names, tags, options.skip_tags):
                found |= names
        lines.append(f"  play #{i} ({play.hosts}): {play.name}\tTAGS: [{', '.join(sorted(play.tags))}]")
        lines.append(f"      TASK TAGS: [{', '.join(sorted(found))}]")
        lines.append("")
    return "\n".join(lines) + "\n"
