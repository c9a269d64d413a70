"""What recording a run in the history costs, per run and per task, on each backend.

Two measures, each on a fresh SQLite file and on a fresh database of a private PostgreSQL
cluster (tests/pg.py: initdb in a temp dir, 127.0.0.1, stopped by pid at the end):

- the store, as the recorder's writer thread drives it: per run, start_run + finish_run
  (one transaction each); per task, one add_tasks transaction of a task's rows on --hosts
  hosts, divided by the rows;
- whole runs through opsrunner.run (the library, this process): a playbook of --tasks
  `debug` tasks on --hosts local hosts, with no history, then with each backend; the
  difference per run and per task row is what history adds to a run's wall time.

    .venv/bin/python bench/history_cost.py                       # 200 runs, 50 tasks x 10 hosts
    .venv/bin/python bench/history_cost.py --runs 50 --reps 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

import opsrunner  # noqa: E402
from opsrunner.history.store import HistoryStore, RunRow, TaskRow  # noqa: E402


def store_costs(location: str, runs: int, hosts: int) -> tuple[float, float]:
    """(ms per run for start + finish, ms per task row in batches of `hosts`)."""
    store = HistoryStore(location)
    start = time.perf_counter()
    for n in range(runs):
        store.start_run(RunRow(id=f"s{n}", started=time.time(), command="opsrunner play x", playbook="/x.yml"))
        store.finish_run(f"s{n}", 0, {f"h{i}": {"ok": 1} for i in range(hosts)})
    per_run = (time.perf_counter() - start) * 1000 / runs
    store.start_run(RunRow(id="tasks", started=time.time()))
    start = time.perf_counter()
    for seq in range(runs):
        store.add_tasks("tasks", [(seq * hosts + i, TaskRow("p", f"t{seq}", "debug", f"h{i}", "ok", False, False,
                                                            "m", "", 0.01)) for i in range(hosts)])
    per_row = (time.perf_counter() - start) * 1000 / (runs * hosts)
    store.close()
    return per_run, per_row


def one_run(project: Path, history: str | None) -> float:
    """Seconds of one run of the project's playbook (recorded in `history`, or not)."""
    start = time.perf_counter()
    result = opsrunner.run(opsrunner.PlayRequest(project / "site.yml", inventory=[project / "inv.yml"],
                                                 history=history is not None, history_path=history))
    assert result.exit_code == 0
    return time.perf_counter() - start


def added_ms(project: Path, locations: dict[str, str], reps: int) -> dict[str, float]:
    """Per backend, the median of (run with it - run without history), runs interleaved so
    that the load of a shared machine drifts alike for all."""
    added: dict[str, list[float]] = {name: [] for name in locations}
    for _ in range(reps):
        for name, where in locations.items():
            base = one_run(project, None)
            added[name].append((one_run(project, where) - base) * 1000)
    return {name: statistics.median(values) for name, values in added.items()}


def make_project(root: Path, tasks: int, hosts: int) -> Path:
    root.mkdir(exist_ok=True)
    tasks_list = [{"name": f"step {i}", "debug": {"msg": "x"}} for i in range(tasks)]
    (root / "site.yml").write_text(yaml.safe_dump([{"name": "b", "hosts": "all", "gather_facts": False,
                                                    "tasks": tasks_list}]))
    (root / "inv.yml").write_text(yaml.safe_dump({"all": {"hosts": {f"h{i:02d}": {"connection": "local"}
                                                                     for i in range(hosts)}}}))
    return root


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    from tests.pg import start_postgres

    server = start_postgres()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            locations: dict[str, Callable[[str], str]] = {
                "sqlite": lambda name: str(root / f"{name}.db"), "postgresql": server.new_database}
            project = make_project(root, args.tasks, args.hosts)
            small = make_project(root / "small", 1, 1)
            rows = args.tasks * args.hosts
            stores = {name: store_costs(where("store"), args.runs, args.hosts) for name, where in locations.items()}
            one = added_ms(small, {name: where("small") for name, where in locations.items()}, args.reps)
            many = added_ms(project, {name: where("many") for name, where in locations.items()}, args.reps)
            print(f"| backend | store: ms per run | store: ms per task row | 1x1 run: ms added | "
                  f"{args.tasks}x{args.hosts} run: ms added | ms added per task row |")
            print("|---|---|---|---|---|---|")
            for name, (per_run, per_row) in stores.items():
                per_task = (many[name] - one[name]) / (rows - 1)
                print(f"| {name} | {per_run:.2f} | {per_row:.3f} | {one[name]:.1f} | {many[name]:.1f} | "
                      f"{per_task:.3f} |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPSRUNNER_TEST_POSTGRES", "auto")
    sys.exit(main())
