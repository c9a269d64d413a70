"""Which tasks --tags and --skip-tags select, by a task's tags: the one rule the run's
selection and the `selected_tag` template test both use."""

from __future__ import annotations


def tags_selected(task_tags: frozenset[str], tags: frozenset[str], skip: frozenset[str]) -> bool:
    """Ansible's rules, including the special tags `always` and `never`."""
    if task_tags & skip or ("always" in task_tags and "always" in skip):
        return False
    if "never" in task_tags and not (task_tags & (tags - {"all"})):
        return False
    if not tags or "all" in tags:
        return True
    if "always" in task_tags:
        return True
    if "tagged" in tags and task_tags:
        return True
    if "untagged" in tags and not task_tags:
        return True
    return bool(task_tags & tags)
