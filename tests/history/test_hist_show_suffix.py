"""`opsrunner show` finds a run by the random part of its id (what people copy from a
message), as by a prefix; a part that several runs end with lists them."""

from __future__ import annotations

from pathlib import Path

from opsrunner.history.store import HistoryStore, RunRow
from tests.helpers import ProjectEnv


def _record(env: ProjectEnv, *ids: str) -> None:
    store = HistoryStore(Path(env.vars["OPSRUNNER_HISTORY"]))
    for n, run_id in enumerate(ids):
        store.start_run(RunRow(id=run_id, started=1000.0 + n))
        store.finish_run(run_id, 0, {})
    store.close()


def test_show_takes_the_random_part_of_a_run_id(tmp_path: Path) -> None:
    env = ProjectEnv(tmp_path)
    _record(env, "20261205-063518-bd552624", "20261205-063600-11112624", "20261205-063700-0000aaaa")
    found = env.run("show", "bd552624")
    assert found.rc == 0, found.err
    assert found.out.startswith("run 20261205-063518-bd552624: ok (exit code 0)")
    assert env.run("show", "20261205-063518").out.startswith("run 20261205-063518-bd552624: ok")
    ambiguous = env.run("show", "2624")
    assert ambiguous.rc == 5
    assert ambiguous.err == ("ERROR: run id suffix '2624' is ambiguous; it matches:\n"
                             "  20261205-063600-11112624\n  20261205-063518-bd552624\n")
    assert env.run("show", "20261205-063518-bd552624", "--json").rc == 0


def test_a_short_end_of_an_id_picks_no_run(tmp_path: Path) -> None:
    """A digit or two at the end of an id would pick a run by chance: a suffix shorter than 4
    characters matches none (a prefix of any length still does)."""
    env = ProjectEnv(tmp_path)
    _record(env, "20261205-063518-bd552627", "20261205-063600-0000aaaa")
    assert env.run("show", "7").rc != 0
    assert env.run("show", "627").rc != 0
    assert env.run("show", "2627").out.startswith("run 20261205-063518-bd552627: ok")
