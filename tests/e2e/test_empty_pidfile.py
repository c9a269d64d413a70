"""An empty pidfile (`-e pidfile=`) is bad input for every task that takes one, each named
with its file, line and key (only the rollback's was), exit 4 before any host is touched."""

from __future__ import annotations

from tests.conftest import ROOT
from tests.helpers import cli


def test_an_empty_pidfile_names_every_task_that_takes_it() -> None:
    res = cli("check", "restart_training.yml", "-e", "pidfile=", cwd=ROOT)
    assert res.rc == 4, res.out + res.err
    tasks = ROOT / "roles" / "training_restart" / "tasks" / "main.yml"
    # Told where the empty value was set (-e), then each task that takes it, with its line.
    for module in ("job_lock", "deploy_code", "kill_old", "launch_detached", "verify", "rollback"):
        assert f"'' should be non-empty (from {{{{ pidfile }}}}); used by {module}.pidfile at {tasks}:" in res.err, \
            (module, res.err)
    # job_lock twice (take, release), launch_detached twice (the check before the stop, the launch)
    assert res.err.count("ERROR: -e pidfile=: ") == 8, res.err
    assert res.err.count("used by launch_detached.pidfile at ") == 2, res.err
