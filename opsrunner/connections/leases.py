"""The controller's watch over the job locks a host's agent holds for the run (AgentSession's
part that needs no stream): which locks, their lease, and whether the controller may have
gone quiet long enough for the agent to let them go.

The agent (remote/job_locks.py) lets its locks go, and exits, after the lease without any
request: a controller stopped (SIGSTOP, a suspended laptop) for that long has lost them even
though nothing it can see changed, and a reply the agent wrote before then may still wait to
be read. So this side notes each moment it saw itself running while in touch with the agent
(at least every quarter lease while locks are held); a longer gap means the lease may have
run out, and the agent is asked (job_held) before anything more is taken from it.
"""

from __future__ import annotations

import time

from opsrunner.errors import ConnectionFailed

#: Seconds the agent keeps this run's job locks without any request (locks/job_lock.py sets
#: the lease it asks for: the `job_lock_lease` variable).
DEFAULT_LEASE_S = 60.0
_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def awake_clock() -> float:
    """Seconds on a clock that runs on while this controller is stopped (SIGSTOP) or its
    machine suspended (CLOCK_BOOTTIME where there is one): the target's lease runs on then too."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


class JobLocksLost(ConnectionFailed):
    """The job locks this run held on a host went with its agent (a lease that ran out while
    the controller was not heard from, or an agent that died): another run may have acted on
    the job since. The host is out of the run (unreachable): no further task, and no rescue,
    acts on a job this run no longer holds."""


class LeaseWatch:
    """The job locks of one agent session, their lease, and the controller's gaps."""

    def __init__(self) -> None:
        #: The job locks this session's agent holds for the run (their paths as requested): the
        #: agent's own process keeps them (remote/job_locks.py), so a new agent holds none.
        self.locks: set[str] = set()
        #: The lease the agent keeps the locks for without a request (the shortest asked for).
        self.lease = DEFAULT_LEASE_S
        #: Why the locks were lost, once they were (JobLocksLost from then on).
        self._locks_lost: str | None = None
        #: Whether a caller was told (JobLocksLost raised); else the run's end tells (lost_at_end).
        self._lost_told = False
        #: Why the locks were found lost only at the end of the run (end()), for the run to report.
        self.lost_at_end: str | None = None
        #: awake_clock() when this controller last saw itself running while in touch with the
        #: agent, and the longest stretch without that in the current exchange.
        self._awake_at = awake_clock()
        self._gap = 0.0

    def _hold(self, path: str, lease: float) -> None:
        self.lease = lease if not self.locks else min(self.lease, lease)  # as the agent keeps it
        self.locks.add(path)

    def _begin(self) -> None:
        """An exchange with the agent starts: its gap so far is the time since the last one."""
        self._gap = 0.0
        self._woke()

    def _woke(self) -> None:
        now = awake_clock()
        self._gap = max(self._gap, now - self._awake_at)
        self._awake_at = now

    def _may_have_lapsed(self) -> bool:
        """Locks are held and this exchange had a gap in which their lease may have run out
        (the agent counts from its last reply: half the lease leaves room for slow hops)."""
        return bool(self.locks) and self._gap >= self.lease / 2

    def _wait_slice(self, wait: float | None) -> float | None:
        """A wait on the agent, cut to a quarter lease while locks are held: the controller
        wakes that often, so a longer gap is a pause, not a slow request."""
        if not self.locks:
            return wait
        return self.lease / 4 if wait is None else min(wait, self.lease / 4)

    def _locks_went(self, reason: str) -> None:
        """The agent (and the kernel's flocks with it) went: `reason` says how."""
        held = ", ".join(sorted(self.locks))
        if self._gap >= self.lease / 2:  # not heard from for (about) the lease: it ran out
            self._locks_lost = self._lapsed(None)
        else:
            self._locks_lost = (
                f"the job lock(s) this run held here ({held}) were let go: the remote agent {reason} (the "
                "target also lets a lock go when it has not heard from the controller for the lock's lease, "
                "as after a pause of the controller). Another run may have acted on the job since: nothing "
                "more is done on this host in this run")
        self._lost_told = False
        self.locks.clear()

    def _lapsed(self, consequence: str | None) -> str:
        """Why the locks went after a stretch without word from this controller (self._gap)."""
        paths = sorted(self.locks)
        which = f"the job lock at {paths[0]} was" if len(paths) == 1 else f"the job locks at {', '.join(paths)} were"
        return (f"{which} let go after no word from this controller for {self._gap:.0f}s, past the lock's lease "
                f"of {self.lease:g}s (e.g. the controller was stopped or suspended): another run may have acted "
                f"on the job since{', so ' + consequence if consequence else ''}. Nothing more is done on this "
                "host in this run")

    def check_locks(self) -> None:
        """JobLocksLost when the job locks this run held here went (every later request says so too)."""
        if self._locks_lost is not None:
            raise self._told()

    def _told(self) -> JobLocksLost:
        self._lost_told = True
        return JobLocksLost(self._locks_lost or "the job locks this run held here were let go")
