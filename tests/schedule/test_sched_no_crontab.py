"""Where there is no `crontab` command, `schedule add --cron` says so (exit 1, as where
systemd is not running) and writes nothing; list and remove say it too, never a traceback.
The commands run with a PATH holding neither crontab nor systemctl, and HOME in the test's
folder, so nothing can reach this machine's crontab or systemd whatever they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_yaml
from tests.helpers import CliResult, ProjectEnv

NO_CRONTAB = ("ERROR: crontab is not installed here (no crontab command), and systemd is not running either: "
              "install cron, or set $OPSRUNNER_CRONTAB=FILE to only write the crontab line to FILE, or leave out "
              "--cron and use --unit-dir DIR to only write a timer's units (nothing runs either until it is "
              "installed elsewhere)\n")
NO_SYSTEMD = ("ERROR: systemd is not running here, and crontab is not installed either (no crontab command): use "
              "--unit-dir DIR to only write the units, or --cron with $OPSRUNNER_CRONTAB=FILE to only write the "
              "crontab line to FILE (nothing runs either until it is installed elsewhere), or install cron and use "
              "--cron\n")
NO_CRONTAB_TO_REMOVE = ("ERROR: crontab is not installed here (no crontab command): install cron, or set "
                        "$OPSRUNNER_CRONTAB=FILE to the file its line was written to\n")


class Bare(ProjectEnv):
    """No crontab file ($OPSRUNNER_CRONTAB), no unit directory, and no crontab or systemctl."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        (root / "bin").mkdir()
        (root / "home").mkdir()
        self.vars.update(OPSRUNNER_CRONTAB="", OPSRUNNER_UNIT_DIR="", PATH=str(root / "bin"), HOME=str(root / "home"),
                         XDG_CONFIG_HOME=str(root / "home" / ".config"))
        write_yaml(self.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
        write_yaml(self.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})

    def written(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                      if not p.is_relative_to(self.project) and p.name not in ("bin", "home", "proj"))


@pytest.fixture
def env(tmp_path: Path) -> Bare:
    return Bare(tmp_path)


def _refused(res: CliResult, message: str) -> None:
    assert res.rc == 1, res.out + res.err
    assert message in res.err and "Traceback" not in res.err and "unexpected" not in res.err, res.err


@pytest.mark.parametrize("extra", [[], ["--dry-run"], ["--every", "15m"]])
def test_cron_without_a_crontab_command_is_refused_and_nothing_is_written(env: Bare, extra: list[str]) -> None:
    when = extra if "--every" in extra else ["--at", "daily", *extra]
    _refused(env.run("schedule", "add", "c", "site.yml", "-i", "inv.yml", *when, "--cron"), NO_CRONTAB)
    assert env.written() == []


def test_a_timer_without_systemd_is_refused_and_nothing_is_written(env: Bare) -> None:
    _refused(env.run("schedule", "add", "s", "site.yml", "-i", "inv.yml", "--at", "daily"), NO_SYSTEMD)
    assert env.written() == []


def test_list_and_remove_of_a_cron_schedule_without_crontab(env: Bare) -> None:
    crontab = env.root / "crontab"
    added = env.run("schedule", "add", "c", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
    assert added.rc == 1  # first made where a crontab file stands in for it
    env.vars["OPSRUNNER_CRONTAB"] = str(crontab)
    assert env.run("schedule", "add", "c", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron").rc == 0
    env.vars["OPSRUNNER_CRONTAB"] = ""
    listing = env.run("schedule", "list")
    assert listing.rc == 0, listing.err
    assert listing.out.splitlines()[1].split()[:4] == ["c", "daily", "-", "-"]  # not active: no crontab here
    # The schedule records the file its line went to: removed from there without the variable.
    spec = (env.root / "schedules" / "c.yml").read_text()
    assert f"crontab_file: {crontab}" in spec, spec
    removed = env.run("schedule", "remove", "c")
    assert removed.rc == 0 and "removed the crontab entry of c" in removed.out, removed.out + removed.err
    assert "opsrunner-schedule:c" not in crontab.read_text() and not (env.root / "schedules" / "c.yml").exists()
    # One recorded without a file (the user's crontab, an older schedule) needs a crontab to leave.
    (env.root / "schedules" / "c.yml").write_text(spec.replace(f"crontab_file: {crontab}\n", ""))
    _refused(env.run("schedule", "remove", "c"), NO_CRONTAB_TO_REMOVE)
    assert (env.root / "schedules" / "c.yml").exists()  # kept: its crontab line could not be removed


def test_the_ways_forward_each_message_names_work_here(env: Bare) -> None:
    """Neither systemd nor crontab: both messages name --unit-dir and $OPSRUNNER_CRONTAB, and
    each of them adds the schedule on this machine (nothing else would)."""
    for cron in ([], ["--cron"]):
        refused = env.run("schedule", "add", "s", "site.yml", "-i", "inv.yml", "--at", "daily", *cron)
        assert refused.rc == 1 and "--unit-dir DIR" in refused.err and "$OPSRUNNER_CRONTAB=FILE" in refused.err
        assert "use --cron," not in refused.err and "leave out --cron for" not in refused.err  # neither works here
    units = env.root / "units-here"
    added = env.run("schedule", "add", "s", "site.yml", "-i", "inv.yml", "--at", "daily", "--unit-dir", str(units))
    assert added.rc == 0, added.err
    assert sorted(p.name for p in units.iterdir()) == ["opsrunner-s.service", "opsrunner-s.timer"]
    env.vars["OPSRUNNER_CRONTAB"] = str(env.root / "crontab")
    added = env.run("schedule", "add", "c", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
    assert added.rc == 0, added.err
    assert (env.root / "crontab").read_text().count("opsrunner") > 0


def test_without_systemd_but_with_crontab_the_timer_message_offers_cron(env: Bare) -> None:
    crontab = env.root / "bin" / "crontab"
    crontab.write_text("#!/bin/sh\nexit 1\n")
    crontab.chmod(0o755)
    _refused(env.run("schedule", "add", "s", "site.yml", "-i", "inv.yml", "--at", "daily"),
             "ERROR: systemd is not running here: use --cron, or --unit-dir DIR to only write the units\n")
    assert env.written() == ["bin/crontab"]
