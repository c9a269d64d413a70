"""The task an unfinished run is in, as its history row keeps it (history/inflight.py): with the
linear strategy the one task of all hosts; with strategy free each host's own, a host leaving
its task when its result comes, and what a module said it had done kept per host."""

from __future__ import annotations

from opsrunner.events import TaskEnd, TaskProgress, TaskStart
from opsrunner.history.inflight import InFlight
from opsrunner.results import Status, TaskResult


def _start(task: str, module: str, hosts: list[str], source: str, strategy: str = "free") -> TaskStart:
    return TaskStart("p", task, module, hosts, source=source, strategy=strategy)


def _end(task: str, module: str, host: str, source: str) -> TaskEnd:
    return TaskEnd("p", task, module, host, TaskResult(Status.CHANGED, changed=True), source=source)


def test_linear_keeps_the_one_task_of_all_hosts() -> None:
    flight = InFlight(lambda text: text.replace("s3cret", "********"))
    flight.started(_start("Roll back s3cret", "rollback", ["h1", "h2"], "pb.yml:3", strategy="linear"))
    assert flight.progress(TaskProgress("p", "Roll back s3cret", "rollback", "h1", "stopped pid 4"))
    flight.ended(_end("Roll back s3cret", "rollback", "h1", "pb.yml:3"))  # the task stays the run's
    assert flight.title == "Roll back ********"
    assert flight.record == {"module": "rollback", "hosts": ["h1", "h2"], "so_far": {"h1": "stopped pid 4"}}


def test_free_names_each_hosts_own_task_and_forgets_a_host_that_ended_it() -> None:
    flight = InFlight(lambda text: text)
    flight.started(_start("Roll back", "rollback", ["h1"], "pb.yml:3"))
    flight.started(_start("Roll back", "rollback", ["h2"], "pb.yml:3"))
    assert flight.title == "Roll back"  # one task on every host in flight: named as linear names it
    assert flight.progress(TaskProgress("p", "Roll back", "rollback", "h2", "stopped pid 5", source="pb.yml:3"))
    flight.ended(_end("Roll back", "rollback", "h2", "pb.yml:3"))
    flight.started(_start("Verify", "verify", ["h2"], "pb.yml:9"))
    assert flight.progress(TaskProgress("p", "Roll back", "rollback", "h1", "stopped pid 4", source="pb.yml:3"))
    # a progress of a task the host is no longer in is not its in-flight one
    assert not flight.progress(TaskProgress("p", "Roll back", "rollback", "h2", "late", source="pb.yml:3"))
    assert flight.title == "Roll back (h1); Verify (h2)"
    assert flight.record == {"module": "rollback", "hosts": ["h1", "h2"], "so_far": {"h1": "stopped pid 4"},
                             "tasks": {"h1": {"task": "Roll back", "module": "rollback"},
                                       "h2": {"task": "Verify", "module": "verify"}}}
    before = flight.record
    flight.ended(_end("Roll back", "rollback", "h1", "pb.yml:3"))
    assert flight.record is not before and flight.title == "Verify"
    assert flight.record["hosts"] == ["h2"] and flight.record["so_far"] == {}
