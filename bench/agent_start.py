"""Agent start and per-task overhead of two checkouts, side by side in one run.

For each checkout (a directory holding an `opsrunner` package), alternating, REPS times:
- cold start: the first agent on a fresh HOME (the artifact sent and stored in the cache);
- warm start: a new agent from that cache (what every run after the first pays per host);
- agent call: the median round trip of a `read` request on a started agent;
all on the local connection, in a fresh controller process each time (bytecode caching on,
as on a user's machine). And the per-task overhead of a play, (T[201 tasks] - T[1 task]) / 200
on one local host, from back-to-back `opsrunner play` runs of each checkout.

    .venv/bin/python bench/agent_start.py OLD_TREE NEW_TREE [--reps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = r"""
import json, sys, time
from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.factory import ConnectionFactory
factory = ConnectionFactory()
out = {}
for label in ("cold", "warm"):
    conn = factory.get(ConnectionSpec(name=label, kind="local", python=sys.executable))
    t0 = time.perf_counter()
    conn.agent().call("read", {"paths": []})
    out[label] = (time.perf_counter() - t0) * 1000
    if label == "warm":
        calls = []
        for _ in range(50):
            t0 = time.perf_counter()
            conn.agent().call("read", {"paths": []})
            calls.append((time.perf_counter() - t0) * 1000)
        calls.sort()
        out["call"] = calls[len(calls) // 2]
factory.close_all()
print(json.dumps(out))
"""


def _env(tree: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree), HOME=str(home), OPSRUNNER_HISTORY=str(home / "h.db"))
    return env


def starts(tree: Path) -> dict[str, float]:
    """One fresh controller: a cold start (new HOME), a warm start, the median call."""
    with tempfile.TemporaryDirectory(prefix="agent-start-") as home:
        proc = subprocess.run([sys.executable, "-c", PROBE], env=_env(tree, Path(home)), capture_output=True,
                              text=True, check=True, timeout=120)
        result: dict[str, float] = json.loads(proc.stdout)
        return result


def play_time(tree: Path, home: Path, playbook: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "opsrunner", "play", str(playbook), "--no-history"], cwd=home,
                   env=_env(tree, home), capture_output=True, check=True, timeout=600)
    return time.perf_counter() - t0


def overhead(trees: list[Path], reps: int) -> dict[Path, float]:
    """ms per task: the median over pairs of back-to-back runs of (T[201] - T[1]) / 200."""
    per: dict[Path, list[float]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="agent-overhead-") as folder:
        home = Path(folder)
        books = {}
        for n in (1, 201):
            tasks = "\n".join(f'    - {{name: t{i}, command: "true"}}' for i in range(n))
            books[n] = home / f"pb{n}.yml"
            books[n].write_text(f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}\n")
        for tree in trees:  # warm-up: caches and bytecode
            play_time(tree, home, books[1])
        for _ in range(reps):
            for tree in trees:
                long, short = play_time(tree, home, books[201]), play_time(tree, home, books[1])
                per[tree].append((long - short) / 200 * 1000)
    return {t: statistics.median(v) for t, v in per.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs=2, type=Path, help="the old and the new checkout")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    trees = [t.resolve() for t in args.trees]
    figures: dict[Path, dict[str, list[float]]] = {t: {"cold": [], "warm": [], "call": []} for t in trees}
    for rep in range(args.reps):
        for tree in trees[rep % 2:] + trees[:rep % 2]:  # alternating order
            for key, value in starts(tree).items():
                figures[tree][key].append(value)
    per_task = overhead(trees, max(3, args.reps // 3))  # the pairs printed below
    print(f"{'checkout':<40} {'cold start ms':>14} {'warm start ms':>14} {'agent call ms':>14} {'per task ms':>12}")
    for tree in trees:
        f = figures[tree]
        print(f"{tree!s:<40} {statistics.median(f['cold']):>14.1f} {statistics.median(f['warm']):>14.1f} "
              f"{statistics.median(f['call']):>14.2f} {per_task[tree]:>12.2f}")
    pairs = max(3, args.reps // 3)
    print(f"(medians of {args.reps} fresh controllers each; per task: {pairs} pairs of 201/1-task plays)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
