"""What a run is asked to do (PlayRequest: the playbook, inventories, -e values and every
flag of `opsrunner play`) and what it works on once loaded (RunInputs). Apart from api.py, which
runs them, so that the history's row (runrecord.py) and the logs' reader use them without
importing the runner."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsrunner.becomeopts import BecomeDefaults
from opsrunner.connections.startslots import DEFAULT_START_SLOTS
from opsrunner.errors import Problem, SourcePos, ValidationError
from opsrunner.selection import RunOptions, TaskConfirm, split_tags

if TYPE_CHECKING:
    from opsrunner.inventory import Inventory
    from opsrunner.playbook import Playbook
    from opsrunner.secrets import Masker


@dataclass(frozen=True)
class PlayRequest:
    """What to run, as `opsrunner play` takes it (relative paths from the working directory)."""

    playbook: str | Path
    #: Inventory files or directories (default: the project's inventory/hosts.yml).
    inventory: Sequence[str | Path] = ()
    #: -e values as the command line takes them: key=value, a YAML/JSON mapping, @file.
    extra_vars: Sequence[str] = ()
    #: More extra vars, already parsed (for library callers); they win over `extra_vars`.
    variables: Mapping[str, Any] = field(default_factory=dict)
    limit: str | None = None
    tags: Sequence[str] = ()
    skip_tags: Sequence[str] = ()
    check: bool = False
    diff: bool = False
    forks: int = 10
    #: Hosts starting their connection and agent at once (connections/startslots.py).
    connect_slots: int = DEFAULT_START_SLOTS
    #: --ssh-workers: processes holding the ssh connections; None: the run decides (sshworkers.py).
    ssh_workers: int | None = None
    verbosity: int = 0
    force_handlers: bool = False
    #: Refuse to start while another run of this playbook+inventory holds the run lock here.
    run_lock: bool = False
    #: Record the run in the run history (the database at `history_path`, or the default).
    history: bool = True
    history_path: str | None = None
    #: The schedule this run belongs to (recorded in the history).
    schedule: str | None = None
    #: The history row's id (default: a new sortable id).
    run_id: str | None = None
    #: The command line to record (default: `opsrunner play` with this request's arguments).
    argv: Sequence[str] | None = None
    #: --start-at-task: skip the tasks before the first one this name (or glob) names.
    start_at_task: str | None = None
    #: --step: True asks at the terminal before each task; or an object that decides.
    step: bool | TaskConfirm = False
    #: -u, --private-key, -c: defaults for hosts whose vars set no user, key or connection.
    user: str | None = None
    private_key: str | None = None
    connection: str | None = None
    #: `I/N`: run only the hosts of slice I of N (selection.HostSlice; docs/scale-out.md).
    host_slice: str | None = None
    #: Ties the slices of one logical run together in the history (history/groups.py).
    run_group: str | None = None
    #: A history that cannot be written stops the run before any host is touched (exit 1);
    #: otherwise the run goes on with a warning.
    history_required: bool = False
    #: -b, --become-user, --become-method and the -K password: defaults plays and tasks override.
    become: BecomeDefaults = field(default_factory=BecomeDefaults)

    def options(self, extra_vars: dict[str, Any]) -> RunOptions:
        from opsrunner.connections.defaults import ConnectionDefaults
        from opsrunner.selection import parse_slice
        from opsrunner.sshworkers import workers_wanted

        defaults = ConnectionDefaults(self.user, self.private_key, self.connection)
        # Values the run needs, as --private-key and --slice: bad input, exit 4 (docs/cli.md).
        problems = [Problem(SourcePos("command line"), f"{option} {value}: must be at least 1", option)
                    for option, value in (("--forks", self.forks), ("--connect-slots", self.connect_slots))
                    if value < 1]
        ssh_workers, problem = workers_wanted(self.ssh_workers, os.environ)
        problems += [problem] if problem else []
        problems += defaults.problems()
        if problems:
            raise ValidationError(problems)
        return RunOptions(check=self.check, diff=self.diff, limit=self.limit, tags=split_tags(self.tags),
                          skip_tags=split_tags(self.skip_tags), forks=self.forks, connect_slots=self.connect_slots,
                          ssh_workers=ssh_workers,
                          extra_vars=extra_vars,
                          verbosity=self.verbosity, force_handlers=self.force_handlers,
                          start_at_task=self.start_at_task, step=self._step(), connection=defaults, become=self.become,
                          host_slice=parse_slice(self.host_slice) if self.host_slice is not None else None)

    def _step(self) -> TaskConfirm | None:
        if self.step is True:
            from opsrunner.startat import TerminalStep

            return TerminalStep()
        return None if isinstance(self.step, bool) else self.step

    def command_line(self) -> list[str]:
        """The arguments of the equivalent `opsrunner play` (what history records)."""
        if self.argv is not None:
            return list(self.argv)
        args = ["play", str(self.playbook)]
        for inv in self.inventory:
            args += ["-i", str(inv)]
        for value in self.extra_vars:
            args += ["-e", value]
        args += ["-l", self.limit] if self.limit else []
        args += [f"--tags={','.join(self.tags)}"] if self.tags else []
        args += [f"--skip-tags={','.join(self.skip_tags)}"] if self.skip_tags else []
        args += ["--check"] * self.check + ["--diff"] * self.diff
        args += [f"--start-at-task={self.start_at_task}"] if self.start_at_task else []
        args += ["--step"] if self.step else []
        for flag, given in (("--user", self.user), ("--private-key", self.private_key),
                            ("--connection", self.connection)):
            args += [f"{flag}={given}"] if given else []
        become = self.become
        args += ["--become"] * become.become + ["--ask-become-pass"] * (become.password is not None)
        for flag, given in (("--become-user", become.user), ("--become-method", become.method)):
            args += [f"{flag}={given}"] if given else []
        args += ["--slice", self.host_slice] if self.host_slice else []
        args += ["--run-group", self.run_group] if self.run_group else []
        return args


@dataclass(frozen=True)
class RunInputs:
    """A request's files, loaded and validated: what a run, a check or `logs` works on."""

    playbook: Playbook
    inventory: Inventory
    extra_vars: dict[str, Any]
    options: RunOptions
    #: Knows the secrets of the inputs (-e values, every host's variables) before any task.
    masker: Masker
