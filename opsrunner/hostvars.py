"""Per-host variable assembly in the documented precedence order, and connection settings."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.defaults import ConnectionDefaults
from opsrunner.errors import TemplateError
from opsrunner.includes import load_dynamic_vars_files
from opsrunner.inventory import Inventory
from opsrunner.playbook import Play, Task
from opsrunner.templating import LazyVars
from opsrunner.wrapperspec import wrapper_chain
from opsrunner.yamlsource import positioned


class VariableManager:
    """Builds each host's variables. Lowest precedence first:

    role defaults (every role of the play; the task's own role above the others)
    < inventory `all` < parent groups < child groups < host vars < play vars
    (and vars_files) < vars of the play's roles < the task's role vars (and role params)
    < task vars < registered results < extra vars (-e)
    < magic vars (inventory_hostname, groups, hostvars, play_hosts, item).
    """

    def __init__(self, inventory: Inventory, extra_vars: Mapping[str, Any], check_mode: bool,
                 run_id: str | None = None, verbosity: int = 0,
                 tags: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())) -> None:
        self.inventory = inventory
        #: ansible_run_tags and ansible_skip_tags as ansible-core gives them (["all"] without -t).
        self.run_tags, self.skip_tags = sorted(tags[0]) or ["all"], sorted(tags[1])
        self.verbosity = verbosity
        self.extra_vars = positioned(extra_vars)  # kept: where each was given
        self.check_mode = check_mode
        self.run_id = run_id
        self.registered: dict[str, dict[str, Any]] = {h: {} for h in inventory.hosts}
        #: How many times any host's registered vars changed: what was derived from the vars
        #: before (a host's connection spec, which may read another's through hostvars) holds
        #: while this is the same.
        self.generation = 0
        self._groups = inventory.groups_map()
        self._files_cache: dict[tuple[int, str], dict[str, Any]] = {}

    def for_task(self, play: Play, task: Task | None, host: str, play_hosts: list[str],
                 all_hosts: list[str] | None = None) -> LazyVars:
        layers: list[Mapping[str, Any]] = [play.role_defaults]
        if task and task.role:
            layers.append(task.role.defaults)
        layers += self.inventory.var_layers(host)
        layers.append(play.vars)
        if play.vars_files:
            magic = self._magic(play, host, play_hosts, all_hosts)
            layers.append(self._vars_files(play, host, [*layers, self.extra_vars, magic]))
        layers.append(play.role_vars)
        if task and task.role:
            layers += [task.role.vars, task.role_params]
        if task:
            layers.append(task.kw("vars") or {})
        layers += [self.registered[host], self.extra_vars, self._magic(play, host, play_hosts, all_hosts)]
        return LazyVars(layers)

    def _magic(self, play: Play, host: str, play_hosts: list[str], all_hosts: list[str] | None) -> dict[str, Any]:
        return {
            "inventory_hostname": host,
            "inventory_hostname_short": host.split(".")[0],
            "groups": self._groups,
            # As in ansible-core: every group but `all`, so `ungrouped` for a host in no group.
            "group_names": [g for g in self.inventory.hosts[host].groups if g != "all"],
            "hostvars": HostVars(self, play, play_hosts),
            "play_hosts": play_hosts,
            "ansible_play_batch": play_hosts,
            "ansible_play_hosts": play_hosts if all_hosts is None else all_hosts,
            "check_mode": self.check_mode,
            "ansible_check_mode": self.check_mode,
            "ansible_verbosity": self.verbosity,
            "ansible_run_tags": self.run_tags,
            "ansible_skip_tags": self.skip_tags,
            "playbook_dir": str(play.base_dir),
            "opsrunner_playbook": play.pos.file,
            "opsrunner_run_id": self.run_id or "",
        }

    def _vars_files(self, play: Play, host: str, layers: list[Mapping[str, Any]]) -> dict[str, Any]:
        """The play's templated vars_files for one host, read once per play and host."""
        key = (id(play), host)
        if key not in self._files_cache:
            self._files_cache[key] = load_dynamic_vars_files(play.vars_files, play.base_dir, LazyVars(layers))
        return self._files_cache[key]

    def register(self, host: str, name: str, value: Any) -> None:
        self.registered[host][name] = value
        self.generation += 1


class HostVars(Mapping[str, Any]):
    """`hostvars[name]`: another host's variables, built only when read."""

    def __init__(self, manager: VariableManager, play: Play, play_hosts: list[str]) -> None:
        self._manager = manager
        self._play = play
        self._play_hosts = play_hosts

    def __getitem__(self, host: str) -> LazyVars:
        if host not in self._manager.inventory.hosts:
            raise KeyError(host)
        return self._manager.for_task(self._play, None, host, self._play_hosts)

    def __iter__(self) -> Iterator[str]:
        return iter(self._manager.inventory.hosts)

    def __len__(self) -> int:
        return len(self._manager.inventory.hosts)


#: Ansible's connection variable names, read when opsrunner's own name is not set (INI inventories
#: written for ansible-playbook keep working).
ANSIBLE_ALIASES: dict[str, tuple[str, ...]] = {
    "connection": ("ansible_connection",),
    "host": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "user": ("ansible_user", "ansible_ssh_user"),
    "key_file": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
    "python_interpreter": ("ansible_python_interpreter",),
}
_UNSET = object()


def connection_spec(host: str, variables: LazyVars, defaults: ConnectionDefaults | None = None) -> ConnectionSpec:
    """Read the reserved connection vars (templated) for one host; errors name the var.
    `defaults` (-u, --private-key, -c) apply where the host's vars set nothing."""
    given = defaults or ConnectionDefaults()

    def named(name: str, default: Any = None) -> tuple[str, Any]:
        """(the variable's name as the inventory wrote it, its value)."""
        for key in (name, *ANSIBLE_ALIASES.get(name, ())):
            try:
                value = variables.get(key, _UNSET)
            except TemplateError as exc:
                raise TemplateError(f"in host var '{key}' of {host}: {exc.bare_message}") from None
            if value is not _UNSET:
                return key, value
        return name, default

    def get(name: str, default: Any = None) -> Any:
        return named(name, default)[1]

    kind_key, kind = named("connection", given.connection or ("local" if host in ("localhost", "127.0.0.1") else "ssh"))
    kind = str(kind)
    checking = str(get("host_key_checking", "strict"))
    if kind not in ("local", "ssh"):
        raise TemplateError(f"host var '{kind_key}' of {host} must be local or ssh, not {kind!r}")
    if checking not in ("strict", "accept-new", "off"):
        raise TemplateError(f"host var 'host_key_checking' of {host} must be strict, accept-new or off")
    command_exec = str(get("command_exec", "auto"))
    if command_exec not in ("auto", "agent", "bare"):
        raise TemplateError(f"host var 'command_exec' of {host} must be auto, agent or bare, not {command_exec!r}")
    port = _number(host, *named("port"), _port, "an integer 1-65535")
    timeout = _number(host, *named("connect_timeout", 10), _seconds, "a positive number of seconds")
    try:
        chain = wrapper_chain(variables)
    except TemplateError as exc:
        raise TemplateError(f"in host var 'wrapper' of {host}: {exc.bare_message}") from None
    address_key, address = named("host", host)
    if kind == "ssh" and str(address).count(":") == 1:  # ssh would read it as host:port (IPv6 has more)
        set_by = any(k in variables for k in ("host", *ANSIBLE_ALIASES["host"]))
        what = f"host var '{address_key}' of {host}" if set_by else "host name"
        raise TemplateError(f"{what} {str(address)!r} holds a ':': give the port as `port: N` "
                            "(an IPv6 address has two or more)")
    return ConnectionSpec(
        name=host,
        kind=kind,
        host=str(address),
        port=port,
        user=get("user", given.user),
        key_file=get("key_file", given.key_file),
        known_hosts_file=get("known_hosts_file"),
        connect_timeout=timeout,
        host_key_checking=checking,
        wrapper=chain,
        python=str(get("python_interpreter", sys.executable if kind == "local" and not chain else "python3")),
        command_exec=command_exec,
    )


def _port(value: Any) -> int | None:
    if value in (None, ""):
        return None
    port = int(value)
    if isinstance(value, bool) or not 1 <= port <= 65535:
        raise ValueError(value)
    return port


def _seconds(value: Any) -> float:
    seconds = float(value)
    if isinstance(value, bool) or not 0 < seconds < float("inf"):
        raise ValueError(value)
    return seconds


def _number(host: str, key: str, value: Any, convert: Any, what: str) -> Any:
    """A numeric connection setting, or a TemplateError naming the variable as written."""
    try:
        return convert(value)
    except (TypeError, ValueError, OverflowError):
        raise TemplateError(f"host var '{key}' of {host} must be {what}, got {value!r}") from None
