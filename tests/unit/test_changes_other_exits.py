"""A run that changed a host and then ended other than failed, unreachable or stopped (an
error, exit 1; a crash, exit 250) is alerted with what it changed; runs where nothing ran
(bad input, bad options) and runs that went well are not."""

from __future__ import annotations

from opsrunner.history.rows import TaskRow
from opsrunner.schedule.changes import changes_lines, run_changes

ROWS = [TaskRow("p", "Write the marker", "copy", "box", "changed", True, False, "wrote /tmp/x", "", 0.1)]


def test_a_run_that_changed_a_host_then_crashed_or_erred_says_what_it_changed() -> None:
    for code in (1, 250):
        changes = run_changes(code, ROWS)
        assert changes is not None, code
        assert changes_lines(changes, "RID")[:3] == [
            "what the run changed before it failed (the hosts are left so):", "[box]",
            "  changed: Write the marker: wrote /tmp/x"]


def test_runs_where_nothing_ran_or_all_went_well_say_nothing_of_changes() -> None:
    for code in (0, 4, 5):
        assert run_changes(code, ROWS) is None
    assert run_changes(250, []) is None
