"""Dashboard and history benchmark: how fast `/`, `/api/runs` and `opsrunner history`
answer over a large run history.

A fresh database in a tmp folder gets --runs runs (default 100,000), written straight
through opsrunner.history.store.HistoryStore as a controller records them: each on 2 hosts
(of a pool of 20) x 7 tasks, 3 playbooks, a third of them scheduled, one in ten failed
with a message, a diagnosis and a log tail. Then a real `opsrunner serve` (127.0.0.1, a
free port, stopped by pid) answers each URL --reps times after one warm-up, and `opsrunner
history` runs --reps times as a user runs it (a new process each time). Reported: median
and max per target, against the targets: `/` and `/api/runs` under 200 ms, `history`
under 300 ms.

    .venv/bin/python bench/dashboard.py                    # 100,000 runs
    .venv/bin/python bench/dashboard.py --runs 20000 --reps 5
    .venv/bin/python bench/dashboard.py --db /tmp/h.db     # keep (or reuse) the database

Exit status: 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opsrunner.history.store import HistoryStore, RunRow, TaskRow  # noqa: E402

TASKS = ("Lock the job", "Deploy the code", "Stop the old run", "Clear the cache", "Launch the new run",
         "Wait for the log", "Verify the run is up (processes, log growing, no errors)")
PLAYBOOKS = ("/srv/ops/playbooks/restart_training.yml", "/srv/ops/playbooks/status.yml",
             "/srv/ops/playbooks/stop_training.yml")
TAIL = "\n".join(f"step {n}: loss 0.{n:04d}" for n in range(15)) + "\nTraceback (most recent call last):\nRuntimeError"
#: (label, URL path or None for `opsrunner history`, target ms)
TARGETS = (
    ("/", "/", 200), ("/api/runs", "/api/runs", 200),
    ("/api/runs?host=gpu07", "/api/runs?host=gpu07", 200),
    ("/api/runs?schedule=nightly&result=failed", "/api/runs?schedule=nightly&result=failed", 200),
    ("/api/runs?host=no-such-host", "/api/runs?host=no-such-host", 200),
    ("/api/runs?page=200", "/api/runs?page=200", 200), ("/hosts", "/hosts", 200),
    ("opsrunner history", None, 300),
)


def fill(db: Path, count: int) -> None:
    """`count` runs through HistoryStore, oldest first, one every 30 s until now."""
    rng = random.Random(25)
    store = HistoryStore(db)
    start = time.time() - count * 30
    for n in range(count):
        run_id = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(start + n * 30))}-{n % 65536:04x}"
        failed = rng.random() < 0.1
        hosts = rng.sample([f"gpu{h:02d}" for h in range(20)], 2)
        store.start_run(RunRow(id=run_id, started=start + n * 30, user="ops", controller="ctl",
                               command=f"opsrunner play {PLAYBOOKS[n % 3]} -i inventory/hosts.yml -e steps=100",
                               cwd="/srv/ops", playbook=PLAYBOOKS[n % 3], git_commit=f"{n:040x}", git_dirty=False,
                               inventory=["inventory/hosts.yml"], extra_vars={"steps": "100"},
                               schedule="nightly" if n % 3 == 0 else None, options={"limit": None, "tags": []}))
        rows = []
        for h, host in enumerate(hosts):
            for t, task in enumerate(TASKS):
                broken = failed and h == 0 and t == len(TASKS) - 1
                rows.append((h * len(TASKS) + t + 1, TaskRow(
                    "Restart", task, "verify" if t == len(TASKS) - 1 else "shell", host,
                    "failed" if broken else "ok", t in (1, 4), False,
                    "processes: expected exactly 1, got 0" if broken else "done",
                    "the job (pid 4242) exited with code 1" if broken else "", 0.2 + t * 0.1,
                    TAIL if broken else "")))
        store.add_tasks(run_id, rows)
        recap = {host: {"ok": 7 - (failed and i == 0), "changed": 2, "unreachable": 0,
                        "failed": int(failed and i == 0), "skipped": 0, "rescued": 0, "ignored": 0}
                 for i, host in enumerate(hosts)}
        store.finish_run(run_id, 2 if failed else 0, recap)
    store.close()


def timed_get(opener: urllib.request.OpenerDirector, url: str) -> float:
    began = time.perf_counter()
    with opener.open(url, timeout=60) as response:
        response.read()
        assert response.status == 200, url
    return (time.perf_counter() - began) * 1000


def timed_history(db: Path) -> float:
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "opsrunner", "history", "--history", str(db)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    elapsed = (time.perf_counter() - began) * 1000
    assert proc.stdout.count("\n") == 21, proc.stdout[:500]
    return elapsed


def measure(db: Path, reps: int) -> list[tuple[str, float, float, int]]:
    serve = subprocess.Popen([sys.executable, "-m", "opsrunner", "serve", "--port", "0", "--history", str(db)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        match = re.search(r"on (http://\S+)/ ", line)
        assert match, line
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        found = []
        for label, path, target in TARGETS:
            if path is None:
                timed_history(db)  # warm-up: the page cache, the bytecode
                times = [timed_history(db) for _ in range(reps)]
            else:
                timed_get(opener, match.group(1) + path)
                times = [timed_get(opener, match.group(1) + path) for _ in range(reps)]
            found.append((label, statistics.median(times), max(times), target))
        return found
    finally:
        serve.terminate()
        try:
            serve.wait(10)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--db", type=Path, help="database to fill (kept); reused when it already exists")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opsrunner-dashboard-bench-") as tmp:
        db = args.db or Path(tmp) / "history.db"
        if not db.exists():
            began = time.perf_counter()
            fill(db, args.runs)
            print(f"wrote {args.runs} runs x 2 hosts x 7 tasks in {time.perf_counter() - began:.0f}s "
                  f"({db.stat().st_size / 2**20:.0f} MiB)")
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        results = measure(db, args.reps)
    print("\n| target | median ms | max ms | target ms | met |\n|---|---|---|---|---|")
    for label, median, worst, target in results:
        print(f"| `{label}` | {median:.0f} | {worst:.0f} | < {target} | {'yes' if median < target else 'NO'} |")
    return 0 if all(median < target for _, median, _, target in results) else 1


if __name__ == "__main__":
    sys.exit(main())
