"""job_lock: the task that takes (or, with `state: unlocked`, releases) a job lock for the
tasks of a restart; the lock itself is locks/job_lock.py (controller) and
remote/job_locks.py (target: the agent holds it)."""

from __future__ import annotations

from typing import Any

from opsrunner.locks.job_lock import holder_of, lease_of, lock_path, release_job_lock, take_job_lock
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import TaskResult


class JobLockModule(Module):
    name = "job_lock"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        path = lock_path(args.get("pidfile"), args.get("path"))
        if args.get("state", "locked") == "unlocked":
            return release_job_lock(ctx.connection, path)
        return take_job_lock(ctx.connection, path, wait=float(args.get("wait") or 0),
                             holder=holder_of(ctx), probe=ctx.check_mode, lease=lease_of(ctx.variables),
                             host=ctx.host)


MODULE = JobLockModule()
