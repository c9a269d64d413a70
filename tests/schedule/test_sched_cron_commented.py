"""A crontab line commented out by hand is one cron does not run: `schedule list` shows no
next run for it and the dashboard says its timer is not active; uncommented, it is again."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import user_crontab
from tests.web.dashboard import Project, serving


def test_a_commented_out_crontab_line_is_not_active(tmp_path: Path) -> None:
    project = Project(tmp_path)
    user_crontab(project.root, project.env)  # a user's crontab, which cron reads (never the machine's)
    for name in ("paused", "running"):
        added = project.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", "0 3 * * *", "--cron")
        assert added.rc == 0, added.err
    crontab = project.root / "crontab"
    lines = crontab.read_text().splitlines()
    crontab.write_text("\n".join("# " + ln if ln.endswith(":paused") else ln for ln in lines) + "\n")
    listing = project.run("schedule", "list")
    assert listing.rc == 0, listing.err
    rows = {line.split()[0]: line.split() for line in listing.out.splitlines()[1:]}
    assert rows["paused"][6:] == ["-", "-", "site.yml"]  # NEXT RUN empty, no run yet
    assert rows["running"][6].startswith("20") and rows["running"][7].endswith(":00")
    with serving(project) as server:
        found = {s["name"]: s for s in server.get("/api/schedules").json()["schedules"]}
    assert found["paused"]["timer_active"] is False and found["paused"]["next_run"] == ""
    assert found["running"]["timer_active"] is True and found["running"]["next_run"] != ""
    crontab.write_text(crontab.read_text().replace("# 0 3 * * *", "0 3 * * *"))
    again = project.run("schedule", "list").out.splitlines()
    assert next(ln.split()[6] for ln in again[1:] if ln.startswith("paused ")).startswith("20")
