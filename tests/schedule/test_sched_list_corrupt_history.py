"""A run history that cannot be read (a corrupt file) does not hide the schedules: `schedule
list` lists each with its next run, LAST RUN and RESULT `unknown`, one warning naming the
history and the cause, exit 0."""

from __future__ import annotations

import pytest

from tests.helpers import ProjectEnv, user_crontab


@pytest.mark.parametrize("garbage", [b"\x00\x17 not a database at all " * 200,
                                     b"SQLite format 3\x00" + b"\xff" * 4000])
def test_list_with_a_corrupt_history_lists_every_schedule(env: ProjectEnv, garbage: bytes) -> None:
    user_crontab(env.root, env.vars)  # the lines in a user's crontab: active, listed with next runs
    for name, when in (("nightly", "0 3 * * *"), ("hourly-check", "0 * * * *")):
        added = env.run("schedule", "add", name, "site.yml", "-i", "inv.yml", "--at", when, "--cron")
        assert added.rc == 0, added.err
    assert env.run("schedule", "run", "nightly").rc == 0
    env.history_db.write_bytes(garbage)
    for f in env.root.glob("history.db-*"):  # its WAL and shared memory go with it
        f.unlink()
    res = env.run("schedule", "list")
    assert res.rc == 0, res.err
    rows = [line.split() for line in res.out.splitlines()]
    assert rows[0] == ["NAME", "SPEC", "NEXT", "RUN", "LAST", "RUN", "RESULT", "PLAYBOOK"]
    by_name = {r[0]: r for r in rows[1:]}
    assert sorted(by_name) == ["hourly-check", "nightly"]
    for name in by_name:
        assert by_name[name][6].startswith("20") and by_name[name][8:] == ["unknown", "unknown", "site.yml"]
    [warning] = res.err.splitlines()
    assert warning.startswith(f"WARNING: cannot read the run history {env.history_db}: ")
    assert warning.endswith("; LAST RUN and RESULT are unknown")
