"""A schedule added with --cron where $OPSRUNNER_CRONTAB names a file: its line is only written
to that file (no cron reads it), so `schedule add` says it is written, not activated, as for a
custom unit directory, and `schedule list` and the dashboard give it no next run and an
inactive timer, never a next run nothing will keep."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import user_crontab
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


def test_a_line_in_the_users_crontab_is_removed_from_there_whatever_the_variable_says(tmp_path: Path) -> None:
    """Added to the user's crontab (no $OPSRUNNER_CRONTAB), a schedule records that; removed
    with the variable set to some file, its line is still taken out of the user's crontab (it
    was looked for in that file, not found, and the schedule removed with its line left live).
    Where no line is found, remove says so."""
    project = Project(tmp_path)
    crontab = user_crontab(project.root, project.env)
    assert project.run("schedule", "add", "u", "site.yml", "-i", "inv.yml", "--cron", "--at", "daily").rc == 0
    assert crontab.read_text().endswith("# opsrunner-schedule:u\n")
    project.env["OPSRUNNER_CRONTAB"] = str(tmp_path / "other-crontab")
    listing = project.run("schedule", "list")
    [row] = [line for line in listing.out.splitlines() if line.startswith("u ")]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row), listing.out  # active: its next run
    removed = project.run("schedule", "remove", "u")
    assert removed.rc == 0 and "removed the crontab entry of u" in removed.out, removed.out + removed.err
    assert "opsrunner-schedule:u" not in crontab.read_text()
    assert project.run("schedule", "add", "f", "site.yml", "-i", "inv.yml", "--cron", "--at", "daily").rc == 0
    (tmp_path / "other-crontab").unlink()
    gone = project.run("schedule", "remove", "f")
    assert gone.rc == 0 and f"no crontab entry of f was found ({tmp_path / 'other-crontab'})" in gone.out, gone.out


def test_a_crontab_file_in_a_missing_folder_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.env["OPSRUNNER_CRONTAB"] = str(tmp_path / "no-such-dir" / "crontab")
    added = project.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--cron", "--at", "daily")
    assert added.rc == 1, added.out + added.err
    assert f"cannot write the crontab file {tmp_path / 'no-such-dir' / 'crontab'}: No such file or directory" \
        in added.err and "Traceback" not in added.err
    assert not (tmp_path / "schedules" / "x.yml").exists()  # nothing installed, nothing kept
