"""A schedule added with --cron where $OPSRUNNER_CRONTAB names a file: its line is only written
to that file (no cron reads it), so `schedule add` says it is written, not activated, as for a
custom unit directory, and `schedule list` and the dashboard give it no next run and an
inactive timer, never a next run nothing will keep."""

from __future__ import annotations

import re
from pathlib import Path

from tests.web.dashboard import Project, serving


def test_a_line_written_to_a_crontab_file_is_written_not_activated(tmp_path: Path) -> None:
    project = Project(tmp_path)
    crontab = Path(project.env["OPSRUNNER_CRONTAB"])
    added = project.run("schedule", "add", "cr", "site.yml", "-i", "inv.yml", "--cron", "--every", "15m")
    assert added.rc == 0, added.err
    first, *wrote = added.out.splitlines()
    assert re.fullmatch(r"schedule cr: site\.yml at '\*-\*-\* \*:00/15:00', written, not activated \(crontab file\): "
                        r"nothing runs it until its line is installed in a crontab, then next run "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d:00", first), added.out
    assert f"  wrote {crontab} (not activated: crontab file)" in wrote, added.out
    assert crontab.read_text().endswith("# opsrunner-schedule:cr\n")
    listing = project.run("schedule", "list")
    assert listing.rc == 0, listing.err
    [row] = [line for line in listing.out.splitlines() if line.startswith("cr ")]
    assert re.fullmatch(r"cr\s+--every 15m\s+-\s+-\s+site\.yml", row), listing.out  # NEXT RUN empty
    with serving(project) as server:
        [schedule] = server.get("/api/schedules").json()["schedules"]
        page = server.get("/schedules").text
    assert schedule["timer_active"] is False and schedule["next_run"] == "", schedule
    assert "cron: inactive" in page and "cron: active" not in page
