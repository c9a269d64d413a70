"""setup: a small fact set from the target agent, stored as the host's variables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsrunner.connections import ops
from opsrunner.modules.base import Module, TaskContext
from opsrunner.results import Status, TaskResult

if TYPE_CHECKING:
    from opsrunner.remote.protocol_host import FactsArgs


class SetupModule(Module):
    name = "setup"

    def run(self, ctx: TaskContext, args: dict[str, Any]) -> TaskResult:
        request: FactsArgs = {}
        facts = ctx.agent(ops.FACTS, request, timeout=ctx.timeout or 60)["facts"]
        variables = {"ansible_facts": facts, **{f"ansible_{k}": v for k, v in facts.items()}}
        return TaskResult(Status.OK, data={"ansible_facts": variables})


MODULE = SetupModule()
