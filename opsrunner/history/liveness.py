"""Is the controller of an unfinished run still alive?

A run's row is closed by its controller at every exit it lives through (recap, error,
Ctrl-C, SIGTERM, a closed stdout). A controller killed by SIGKILL, the OOM killer or a
reboot cannot close it, so readers judge an open row themselves:

- the heartbeat: the controller's history writer stamps the row every HEARTBEAT_S; a row
  of another machine not stamped for STALE_AFTER_S is a run whose controller is gone. This
  works wherever the reader is, also when several controllers share one history database;
- on the controller's own machine its process decides: the row names the controller's pid,
  the start time of that pid (kernel ticks since boot) and the machine (boot id and pid
  namespace); where these match this reader's machine, no such process (or another one
  with that pid) is a controller gone at once, and that very process alive is a run going
  on, however old its heartbeat (a controller stopped by SIGSTOP or starved of CPU does not
  beat, and finishes its run once it goes on).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import lru_cache

#: How often a running controller stamps its row.
HEARTBEAT_S = 5.0
#: A row not stamped for this long belongs to a controller that is gone. Generous against a
#: controller starved of CPU or a database busy for a while: six beats missed.
STALE_AFTER_S = 30.0

GONE = "aborted (controller gone)"


def unrecorded_after(heartbeat: float | None, started: float) -> str:
    """What the record of a run whose controller is gone may lack. Its controller's writer stamps
    the heartbeat in the transaction of the results it took at that time (recorder.py), so every
    result reported before it is recorded, and any after it may not be (floored to the second)."""
    last = heartbeat if heartbeat is not None else started
    same_day = time.localtime(last)[:3] == time.localtime(started)[:3]
    shown = time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", time.localtime(int(last)))
    return f"results after {shown} may be missing: its controller is gone (killed, or cut off from the history)"


@lru_cache(maxsize=1)
def machine_key() -> str:
    """This kernel's boot id and this pid namespace: pids are comparable only where both match
    (containers share the host's boot id but not its pid namespace)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pidns}"


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (None: no such process, or one
    that has exited and is only not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
        fields = stat.rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class ControllerStamp:
    """Who runs a run: written with the run's row when it starts."""

    pid: int
    start_ticks: int | None
    machine: str

    @classmethod
    def of_this_process(cls) -> ControllerStamp:
        pid = os.getpid()
        return cls(pid, start_ticks(pid), machine_key())


def controller_gone(stamp: ControllerStamp | None, heartbeat: float | None, started: float,
                    now: float | None = None) -> bool:
    """True when the controller of an unfinished run is certainly gone.

    On the controller's own machine its process tells, however old the heartbeat: a
    controller stopped (SIGSTOP, a debugger), starved or swapped out beats no more, and is
    running all the same while its pid lives with the start time it was recorded with. Rows
    of other machines, and rows without a start time, fall back to the heartbeat's age."""
    if stamp is not None and stamp.machine and stamp.machine == machine_key():
        ticks = start_ticks(stamp.pid)
        if ticks is None:
            return True
        if stamp.start_ticks is not None:
            return ticks != stamp.start_ticks  # the same pid, another process: gone
    now = time.time() if now is None else now
    last_sign = heartbeat if heartbeat is not None else started
    return now - last_sign > STALE_AFTER_S
