"""verify: is the job really up? On failure, say what happened to it and show the log's end."""

from __future__ import annotations

from typing import Any

from opsrunner.errors import ModuleFailure
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

CHECK_KEYS = ("processes", "min_processes", "log", "port", "gpu_min_memory_mb")


class VerifyModule(Module):
    name = "verify"

    def sanity(self, args: dict[str, Any]) -> list[str]:
        if not any(k in args for k in CHECK_KEYS):
            return ["verify needs at least one check: processes, min_processes, log, port or gpu_min_memory_mb"]
        return []

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        window = max(float(args.get("within") or 0), float(args.get("log_grows") or 0)) \
            + float(args.get("stable_for") or 0)
        timeout = None if ctx.timeout is None else max(ctx.timeout, window + 30)
        reply = ctx.agent("verify", dict(args), timeout=timeout)
        procs = reply.get("procs", [])
        data = {"checks": reply.get("checks", []), "pids": [p["pid"] for p in procs],
                "processes": len(procs), "log_size": reply.get("log_size")}
        if reply.get("ok"):
            passed = ", ".join(f"{c[0]}={c[3]}" for c in reply["checks"])
            return TaskResult(Status.OK, msg=f"all checks passed: {passed}", data=data)
        failed = "; ".join(f"{c[0]}: expected {c[2]}, got {c[3]}" for c in reply["failed"])
        msg = f"{failed}\ndiagnosis: {reply['diagnosis']}"
        if procs:
            msg += "\nprocesses: " + "; ".join(f"{p['pid']} {p['cmdline'][:150]}" for p in procs)
        if args.get("log"):
            tail = reply.get("log_tail") or "(empty or missing)"
            msg += f"\nlast lines of {args['log']}:\n" + "\n".join("  | " + ln for ln in tail.splitlines())
        data["diagnosis"] = reply["diagnosis"]
        data["log_tail"] = reply.get("log_tail", "")
        raise ModuleFailure(msg, data)


MODULE = VerifyModule()
