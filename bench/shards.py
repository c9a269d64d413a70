"""Would worker processes help? One opsrunner process for all hosts against K processes at
once, each taking a shard of the hosts (`--slice I/K`, the hosts split by a hash of their
names), side by side on the same hosts.

A shard per process is the most that host shards in worker processes (Ansible's forks) could
gain: K controllers with K GILs and nothing shared, so no coordination at all. If even that
is not faster than one process, worker processes are not worth their cost on this machine.

    .venv/bin/python bench/shards.py --hosts 50,500 --shards 2,4 --reps 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench, busy_ticks  # noqa: E402


def timed(commands: list[list[str]], cwd: Path, pythonpath: Path = ROOT) -> tuple[float, float, float]:
    """(wall seconds, machine busy CPU seconds, the commands' own CPU seconds: theirs and their
    children's) of the commands run at once, with opsrunner from `pythonpath`."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    busy = busy_ticks()
    before = os.times()
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for cmd in commands]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"{proc.args!r} failed ({proc.returncode}): {err.decode()[-2000:]}")
    wall = time.perf_counter() - start
    after = os.times()
    own = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return wall, (busy_ticks() - busy) / os.sysconf("SC_CLK_TCK"), own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="50")
    parser.add_argument("--shards", default="2")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workload", default="restart")
    parser.add_argument("--own-process-tables", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-shards-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [], args.reps, True)
    bench.own_tables = args.own_process_tables
    rows = ["| hosts | processes | median s | min-max s | machine CPU s (median) | ratio to one process |",
            "|---|---|---|---|---|---|"]
    try:
        for n in (int(x) for x in args.hosts.split(",")):
            d = work / f"{args.workload}-{n}"
            one = bench.prepare("opsrunner", args.workload, bench.hosts(n), d)
            variants = {1: [one]}
            for k in (int(x) for x in args.shards.split(",")):
                variants[k] = [[*one[:-2], "-f", str(n), "--slice", f"{i}/{k}"] for i in range(1, k + 1)]
            for commands in variants.values():
                timed(commands, d)  # warm-up
            results: dict[int, list[tuple[float, float, float]]] = {k: [] for k in variants}
            for rep in range(args.reps):
                order = list(variants)[rep % len(variants):] + list(variants)[:rep % len(variants)]
                for k in order:
                    results[k].append(timed(variants[k], d))
            base = statistics.median(w for w, _, _ in results[1])
            for k, runs in results.items():
                walls = [w for w, _, _ in runs]
                med = statistics.median(walls)
                rows.append(f"| {n} | {k} | {med:.2f} | {min(walls):.2f}-{max(walls):.2f} | "
                            f"{statistics.median(c for _, c, _ in runs):.2f} | {med / base:.2f}x |")
            print("\n".join(rows[-len(results):]), flush=True)
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.workload}, {args.reps} timed runs per cell after one warm-up, alternating; "
          f"{os.cpu_count()} CPUs.\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
