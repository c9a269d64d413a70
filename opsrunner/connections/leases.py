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

import threading
import time
from collections.abc import Callable

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
        #: Once the session ended (end()): why its locks went before the run let go of them, and
        #: whether a caller was told (JobLocksLost raised) before the end. The run reports it
        #: wherever no task result on that host says so (engine._report_lost_locks).
        self.lost_at_end: tuple[str, bool] | None = None
        #: The inventory hosts whose tasks took the locks (the connection may be a become or a
        #: delegated one): the hosts a lost lock is reported on.
        self.held_for: set[str] = set()
        #: Set at end(); the heartbeat thread waits on _wake, set also when the lease shortens.
        self._ended = threading.Event()
        self._wake = threading.Event()
        self._beats: threading.Thread | None = None
        #: awake_clock() when this controller last saw itself running while in touch with the
        #: agent, and the longest stretch without that in the current exchange.
        self._awake_at = awake_clock()
        self._gap = 0.0

    def _hold(self, path: str, lease: float, host: str) -> None:
        before = self.lease if self.locks else None
        self.lease = lease if not self.locks else min(self.lease, lease)  # as the agent keeps it
        self.locks.add(path)
        self.held_for.add(host)
        if before is not None and self.lease < before:
            self._wake.set()  # the heartbeat thread may be in a wait of the longer lease's quarter

    def _beat_loop(self, interval: float | None, beat: Callable[[], None]) -> None:
        """The heartbeat thread: `beat()` every `interval` (a quarter of the lease in force), and
        at once when the lease shortens (_hold), until end()."""
        while not self._ended.is_set():
            self._wake.wait(interval or self.lease / 4)
            self._wake.clear()
            if not self._ended.is_set():
                beat()

    def _stop_beats(self, wait: float) -> None:
        """No more heartbeats; a heartbeat under way is waited for (up to `wait` seconds), so
        that what it found (locks gone) is known before the end's own check."""
        self._ended.set()
        self._wake.set()
        beats = self._beats
        if beats is not None and beats is not threading.current_thread():
            beats.join(wait)

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

    def _lapsed(self, consequence: str | None, at_end: bool = False) -> str:
        """Why the locks went after a stretch without word from this controller (self._gap)."""
        return (f"{self._which()} let go after no word from this controller for {self._gap:.0f}s, past the "
                f"lock's lease of {self.lease:g}s (e.g. the controller was stopped or suspended): another run may "
                f"have acted on the job since{', so ' + consequence if consequence else ''}. {_after(at_end)}")

    def _unconfirmed(self, how: str, consequence: str | None, at_end: bool = False) -> str:
        """Why the locks went with an agent that ended or did not answer (`how`), without a gap
        past their lease."""
        them = "it" if len(self.locks) == 1 else "them"
        return (f"{self._which()} no longer held: the remote agent that held {them} {how}, and "
                f"the target lets a job lock go with its agent: another run may have acted on the job "
                f"since{', so ' + consequence if consequence else ''}. {_after(at_end)}")

    def _which(self) -> str:
        paths = sorted(self.locks)
        return f"the job lock at {paths[0]} was" if len(paths) == 1 else f"the job locks at {', '.join(paths)} were"

    def _end_report(self) -> None:
        """The session ended: what the run's end reports of locks it lost (lost_at_end)."""
        if self._locks_lost is not None:
            self.lost_at_end = (self._locks_lost, self._lost_told)

    def lost_since_taken(self) -> bool:
        """Job locks were taken and went before the run let go of them."""
        return self._locks_lost is not None

    def check_locks(self) -> None:
        """JobLocksLost when the job locks this run held here went (every later request says so too)."""
        if self._locks_lost is not None:
            raise self._told()

    def _told(self) -> JobLocksLost:
        self._lost_told = True
        return JobLocksLost(self._locks_lost or "the job locks this run held here were let go")


def _after(at_end: bool) -> str:
    if at_end:
        return "Found at the end of the run: the host is unreachable in its recap and the run does not end ok"
    return "Nothing more is done on this host in this run"
