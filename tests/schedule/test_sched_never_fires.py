"""A schedule whose date never comes (`0 3 31 2 *`: there is no 31 February) is refused at
`schedule add` (exit 4, nothing written), and one that a hand edit made so is listed as
`never` by `schedule list` and the dashboard, which go on showing every other schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import user_crontab
from tests.web.dashboard import Project, serving


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@pytest.mark.parametrize(("spec", "extra", "message"), [
    ("0 3 31 2 *", ["--cron"], "cron expression '0 3 31 2 *' never fires: no date matches it (at --at)"),
    ("0 3 31 2 *", [], "cron expression '0 3 31 2 *' never fires"),
    ("0 3 31 2 *", ["--unit-dir", "UNITS"], "cron expression '0 3 31 2 *' never fires"),
    ("0 3 31 2 *", ["--cron", "--dry-run"], "cron expression '0 3 31 2 *' never fires"),
    ("*-02-30 03:00", [], "'*-02-30 03:00' never fires: no date in the next 30 years matches it (at --at)"),
    ("2020-01-01 03:00", ["--dry-run"], "'2020-01-01 03:00' never fires"),
])
def test_a_schedule_that_never_fires_is_refused_and_nothing_is_written(
        project: Project, spec: str, extra: list[str], message: str) -> None:
    units = project.root / "custom-units"
    res = project.run("schedule", "add", "t2feb", "site.yml", "-i", "inv.yml", "--at", spec,
                      *[str(units) if e == "UNITS" else e for e in extra])
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: <--at>: {message}" in res.err
    assert "Traceback" not in res.err and res.out == ""
    for written in ("schedules", "crontab", "units", "custom-units"):
        assert not (project.root / written).exists(), written


def test_a_schedule_edited_to_never_fire_is_listed_as_never(project: Project) -> None:
    user_crontab(project.root, project.env)  # the lines in a user's crontab: active, listed with next runs
    for name, spec in (("t2feb", "0 3 1 2 *"), ("hourly-check", "0 * * * *")):
        added = project.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", spec, "--cron")
        assert added.rc == 0, added.err
    for path in (project.root / "schedules" / "t2feb.yml", project.root / "crontab"):  # edited by hand
        path.write_text(path.read_text().replace("0 3 1 2 *", "0 3 31 2 *"))
    listing = project.run("schedule", "list")
    assert listing.rc == 0, listing.err
    rows = {line.split()[0]: line.split() for line in listing.out.splitlines()[1:]}
    assert rows["t2feb"][:7] == ["t2feb", "0", "3", "31", "2", "*", "never"]
    assert rows["hourly-check"][6].startswith("20")  # a date: the other schedule is still listed
    with serving(project) as server:
        answer = server.get("/api/schedules")
        assert answer.status == 200, answer.text
        found = {s["name"]: s for s in answer.json()["schedules"]}
        assert found["t2feb"]["next_run"] == "never" and found["t2feb"]["timer_active"] is True
        assert found["hourly-check"]["next_run"].startswith("20")
        page = server.get("/schedules")
        assert page.status == 200 and "t2feb" in page.text and "hourly-check" in page.text
