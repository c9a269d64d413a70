"""The task a run whose controller was killed was in, as its record has it (RunRow.in_flight),
in what the ABORTED alert says the run left on its hosts: a rollback whose record holds no word
of its progress is said to be cut short, with what it may have done, never that no rollback
ran; a host that had ended it, a run still going on and any other task add nothing."""

from __future__ import annotations

from opsrunner.history.rows import RunRow, TaskRow
from opsrunner.schedule.changes import changes_lines, killed_in, stopped_changes

ROLLBACK = "Roll back to the last good run"
ROWS = [TaskRow("p", "Launch the new run", "launch_detached", "box", "changed", True, False, "launched pid 7", "", 0.1),
        TaskRow("p", "Verify the run", "verify", "box", "failed", False, False, "pid 7 exited", "", 0.1)]


def _aborted(module: str, hosts: list[str], rows: list[TaskRow] | None = None, aborted: bool = True) -> RunRow:
    return RunRow(id="R", started=1.0, tasks=list(ROWS if rows is None else rows), current_task=ROLLBACK,
                  aborted=aborted, in_flight={"module": module, "hosts": hosts, "so_far": {}})


def _lines(run: RunRow) -> list[str]:
    return changes_lines(stopped_changes(run.tasks + killed_in(run)), run.id, recorded_only=True)


def test_a_rollback_a_killed_controller_was_in_is_cut_short_never_no_rollback_ran() -> None:
    lines = _lines(_aborted("rollback", ["box"]))
    assert f"  cut short: {ROLLBACK}: rollback cut short before it told what it had done: it may have stopped the " \
           "job, switched current and relaunched the last good run; what runs there now is not known from the " \
           "record" in lines, lines
    assert not any("no rollback ran" in ln or "LAUNCHED" in ln for ln in lines), lines


def test_a_host_that_ended_the_task_another_task_or_a_live_run_add_nothing() -> None:
    ended = TaskRow("p", ROLLBACK, "rollback", "box", "changed", True, False, "rolled back to x, pid 9, verified", "",
                    1.0)
    assert killed_in(_aborted("rollback", ["box"], [*ROWS, ended])) == []
    assert killed_in(_aborted("command", ["box"])) == []
    assert killed_in(_aborted("rollback", ["box"], aborted=False)) == []
    lines = _lines(_aborted("verify", ["box"]))
    assert any(ln.endswith("; no rollback ran") for ln in lines), lines


def test_under_strategy_free_each_host_is_cut_short_in_its_own_task() -> None:
    """h1 was in the rollback, h2 (which had ended its rollback) in the verify after it: h1's
    rollback is cut short; h2 adds nothing (a verify cut short did nothing to report)."""
    ended = TaskRow("p", ROLLBACK, "rollback", "h2", "changed", True, False, "rolled back to x, pid 9, verified", "",
                    1.0)
    run = RunRow(id="R", started=1.0, tasks=[ended], current_task=f"{ROLLBACK} (h1); Verify the run (h2)",
                 aborted=True, in_flight={"module": "rollback", "hosts": ["h1", "h2"], "so_far": {},
                                          "tasks": {"h1": {"task": ROLLBACK, "module": "rollback"},
                                                    "h2": {"task": "Verify the run", "module": "verify"}}})
    (cut,) = killed_in(run)
    assert (cut.host, cut.task, cut.module, cut.status) == ("h1", ROLLBACK, "rollback", "interrupted")
