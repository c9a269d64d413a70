"""The agent's exec op (remote/commands.py) run as a worker runs it, in a fresh Python: exit
codes and output, no descriptor left open however the exit, the output's end and the deadline
interleave, and no idle poll after the command is done (it once slept 1 ms per command)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.agent_ns import unpack_agent

PROBE = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from opsrunner_agent import commands
polls = []
real_poll = commands.select.poll
class CountingPoll(object):
    def __init__(self):
        self.inner = real_poll()
        self.register, self.unregister = self.inner.register, self.inner.unregister
    def poll(self, ms):
        ready = self.inner.poll(ms)
        polls.append(len(ready))
        return ready
class PollModule(object):
    POLLIN = commands.select.POLLIN
    poll = CountingPoll
commands.select = PollModule
fds = len(os.listdir("/proc/self/fd"))
results, idle_polls = [], 0
for argv in (["true"], ["sh", "-c", "echo out; echo err >&2; exit 3"], ["false"]) * 20:
    del polls[:]
    reply = commands.op_exec({"argv": argv, "timeout": 60})
    results.append([reply["rc"], reply["stdout"], reply["stderr"]])
    idle_polls += polls.count(0)
late = commands.op_exec({"argv": ["sh", "-c", "echo before; exec sleep 30"], "timeout": 0.3})
results.append([late["rc"], late["stdout"], late["timed_out"]])
print(json.dumps({"fds_before": fds, "fds_after": len(os.listdir("/proc/self/fd")), "late": results[-1],
                  "results": results[:3], "same": all(r == results[i % 3] for i, r in enumerate(results[:-1])),
                  "idle_polls": idle_polls}))
"""


def test_exec_op_codes_output_and_no_descriptor_left_open(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-S", "-c", PROBE, str(unpack_agent(tmp_path))], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    report = json.loads(out)
    assert report["results"] == [[0, "", ""], [3, "out\n", "err\n"], [1, "", ""]]
    assert report["same"]
    assert report["late"] == [124, "before\n", True]  # stopped at its deadline, output kept
    assert report["fds_after"] == report["fds_before"]
    # Every poll is woken by the exit (pidfd) or the closed pipes: none just waits out its timeout.
    assert report["idle_polls"] == 0
