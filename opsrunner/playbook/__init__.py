"""Playbooks: YAML -> validated, frozen Play/Task objects that remember their source position.

The loader is split by what it reads, each part a class over the shared state.py:
plays.py (the file and its plays; joins the parts), task_lists.py (tasks and blocks),
roles.py, includes.py (import_*/include_*), module_args.py (a task's module arguments),
keys.py (the keywords and how they pass down). model.py holds Play and Playbook.
"""

from opsrunner.playbook.model import Play, Playbook, resolve_playbook_path
from opsrunner.playbook.plays import load_playbook

# Task, Role and Block live in tasks.py, which modules/ imports too; re-exported for callers.
from opsrunner.tasks import Block, Node, Role, Task, iter_tasks

__all__ = ["Block", "Node", "Play", "Playbook", "Role", "Task", "iter_tasks", "load_playbook",
           "resolve_playbook_path"]
