"""A schedule records the run history in effect at `schedule add` (`--history`, else
$OPSRUNNER_HISTORY, else the user's file) and its scheduled runs go there, whatever the
timer's environment; `schedule list` reads each schedule's runs from it. A PostgreSQL URL's
password is stored nowhere (docs/scale-out.md): not in the schedule file, the units, the
crontab line (the command line a scheduled run shows in `ps`) or the output; a scheduled
run's libpq reads it from ~/.pgpass or $PGPASSWORD, as for any other run.

A scheduled run here is the crontab line's command (`sh -c`) or the unit's ExecStart (in its
WorkingDirectory) run as cron and systemd would: with HOME, PATH and nothing else of the
test's environment (PYTHONPATH aside, so that it runs this checkout's opsrunner)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from tests import pg
from tests.conftest import ROOT, write_yaml
from tests.helpers import ProjectEnv


@pytest.fixture
def env(tmp_path: Path) -> ProjectEnv:
    e = ProjectEnv(tmp_path)
    write_yaml(e.project / "site.yml", [{"hosts": "all", "tasks": [{"debug": {"msg": "hi"}}]}])
    write_yaml(e.project / "inv.yml", {"all": {"hosts": {"node1": {"connection": "local"}}}})
    (tmp_path / "home").mkdir()
    return e


def _bare_env(env: ProjectEnv) -> dict[str, str]:
    """The environment cron or systemd gives a scheduled run: no OPSRUNNER_HISTORY."""
    return {"HOME": str(env.root / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}


def _cron_run(env: ProjectEnv, name: str) -> subprocess.CompletedProcess[str]:
    (line,) = [ln for ln in (env.root / "crontab").read_text().splitlines() if ln.endswith(f":{name}")]
    command = line.split(" ", 5)[5].rsplit(" # opsrunner-schedule:", 1)[0]
    return subprocess.run(["sh", "-c", command], env=_bare_env(env), capture_output=True, text=True, timeout=180)


def _unit_run(env: ProjectEnv, name: str) -> subprocess.CompletedProcess[str]:
    service = (env.root / "units" / f"opsrunner-{name}.service").read_text()
    keys = dict(ln.split("=", 1) for ln in service.splitlines() if "=" in ln and not ln.startswith("#"))
    argv = [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(keys["ExecStart"])]
    return subprocess.run(argv, cwd=keys["WorkingDirectory"], env=_bare_env(env), capture_output=True, text=True,
                          timeout=180)


def _runs(env: ProjectEnv, history: str) -> list[dict[str, object]]:
    res = env.run("history", "--json", "--history", history)
    assert res.rc == 0, res.err
    return list(json.loads(res.out))


def _listed(env: ProjectEnv) -> str:
    """`schedule list` without OPSRUNNER_HISTORY: each schedule's runs read where it records them."""
    env.vars.update(OPSRUNNER_HISTORY="", HOME=str(env.root / "home"))
    res = env.run("schedule", "list")
    assert res.rc == 0, res.err
    return res.out


def test_the_history_of_add_environment_is_where_cron_runs_go(env: ProjectEnv) -> None:
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron")
    assert added.rc == 0, added.err
    assert f"  its runs are recorded in {env.history_db}\n" in added.out
    ran = _cron_run(env, "nightly")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [run] = _runs(env, str(env.history_db))
    assert run["schedule"] == "nightly" and run["exit_code"] == 0
    assert not (env.root / "home" / ".local" / "state" / "opsrunner" / "history.db").exists()
    row = next(ln for ln in _listed(env).splitlines() if ln.startswith("nightly "))
    assert f"ok ({run['id']})" in row


def test_history_option_is_where_timer_runs_go(env: ProjectEnv) -> None:
    other = env.root / "other.db"
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily",
                    "--history", str(other))
    assert added.rc == 0, added.err
    assert f"history: {other}\n" in (env.root / "schedules" / "nightly.yml").read_text()
    ran = _unit_run(env, "nightly")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [run] = _runs(env, str(other))
    assert run["schedule"] == "nightly"
    assert not env.history_db.exists()  # $OPSRUNNER_HISTORY of add: the option came first
    assert f"ok ({run['id']})" in next(ln for ln in _listed(env).splitlines() if ln.startswith("nightly "))


@pytest.mark.parametrize("installer", ["cron", "systemd"])
def test_a_postgres_history_is_where_runs_go_and_its_password_is_stored_nowhere(
        env: ProjectEnv, installer: str, postgres: pg.PrivatePostgres) -> None:
    url = postgres.new_database(f"t_sched_{installer}")
    bare = url.replace(f":{pg.PASSWORD}@", "@")
    env.vars["OPSRUNNER_HISTORY"] = url  # as `opsrunner play` takes it
    dry = env.run("schedule", "add", "again", "site.yml", "-i", "inv.yml", "--at", "daily", "--dry-run")
    assert dry.rc == 0 and f"history: {bare}\n" in dry.out and pg.PASSWORD not in dry.out + dry.err
    added = env.run("schedule", "add", "nightly", "site.yml", "-i", "inv.yml", "--at", "daily",
                    *(["--cron"] if installer == "cron" else []))
    assert added.rc == 0, added.err
    assert f"  its runs are recorded in {bare}\n" in added.out
    assert "WARNING: the run history's password is not kept in the schedule file: its runs read it where " \
           "libpq does (~/.pgpass, $PGPASSWORD)" in added.err
    written = [env.root / "schedules" / "nightly.yml"]
    written += [env.root / "crontab"] if installer == "cron" else list((env.root / "units").iterdir())
    assert f"history: {bare}\n" in written[0].read_text()
    for path in written:  # the units' and cron's command line is what `ps` shows of a run
        assert pg.PASSWORD not in path.read_text(), path
    pgpass = env.root / "home" / ".pgpass"  # where a scheduled run's libpq finds the password
    pgpass.write_text(f"127.0.0.1:{postgres.port}:*:{pg.ROLE}:{pg.PASSWORD}\n")
    pgpass.chmod(0o600)
    ran = _cron_run(env, "nightly") if installer == "cron" else _unit_run(env, "nightly")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "WARNING" not in ran.stderr and pg.PASSWORD not in ran.stdout + ran.stderr
    [run] = _runs(env, url)
    assert run["schedule"] == "nightly" and run["exit_code"] == 0
    listing = _listed(env)
    assert f"ok ({run['id']})" in listing and pg.PASSWORD not in listing


def test_a_password_parameter_is_not_kept_either(env: ProjectEnv) -> None:
    url = "postgresql://ops@127.0.0.1:1/opsdb?password=Pw-in-query-1&sslmode=disable"
    dry = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "daily", "--history", url,
                  "--dry-run")
    assert dry.rc == 0, dry.err
    assert "history: postgresql://ops@127.0.0.1:1/opsdb?sslmode=disable\n" in dry.out
    assert "Pw-in-query-1" not in dry.out + dry.err and "password is not kept" in dry.err


@pytest.mark.parametrize(("args", "extra_env", "source"), [
    (["--history", "mysql://ops:pw@127.0.0.1/db"], {}, "--history"),
    ([], {"OPSRUNNER_HISTORY": "sqlite://history.db"}, "$OPSRUNNER_HISTORY"),
])
def test_a_history_that_is_no_run_history_is_exit_4(env: ProjectEnv, args: list[str], extra_env: dict[str, str],
                                                    source: str) -> None:
    env.vars.update(extra_env)
    res = env.run("schedule", "add", "x", "site.yml", "-i", "inv.yml", "--at", "daily", "--cron", *args)
    assert res.rc == 4, res.out + res.err
    assert f"ERROR: <{source}>: a " in res.err and "URL is no run history: give a SQLite file or a postgresql:// URL" \
        in res.err and f"(at {source})" in res.err and "pw@" not in res.err
    assert not any((env.root / p).exists() for p in ("schedules", "crontab"))
