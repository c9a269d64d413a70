"""Inventory: hosts, groups, variable precedence and host patterns.

Sources are YAML/JSON files (loader.py, yaml.py), INI files (ini.py), directories of
them, or an `-i 'host1,host2,'` list; `group_vars/`/`host_vars/` beside the inventory and
the playbook (vars_dirs.py); Ansible's host patterns (patterns.py)."""

from opsrunner.inventory.loader import load_inventory, localhost_inventory
from opsrunner.inventory.model import RESERVED_VARS, Group, Host, Inventory, VarsDir
from opsrunner.inventory.patterns import PatternError, names_nothing, select_hosts, split_host_pattern

__all__ = [
    "RESERVED_VARS", "Group", "Host", "Inventory", "PatternError", "VarsDir",
    "load_inventory", "localhost_inventory", "names_nothing", "select_hosts", "split_host_pattern",
]
