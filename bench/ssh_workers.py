"""Where do ssh worker processes pay? One opsrunner run of the bench's workloads with
`--ssh-workers K` for each K given (0: the connections in the controller's own process),
side by side on the same hosts, alternating.

    .venv/bin/python bench/ssh_workers.py --hosts 50 --workers 0,2,4,8 --reps 3 --own-process-tables
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench  # noqa: E402
from bench.shards import timed  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="50")
    parser.add_argument("--workers", default="0,2,4,8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--workloads", default="restart,trivial")
    parser.add_argument("--own-process-tables", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-sshworkers-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [], args.reps, True)
    bench.own_tables = args.own_process_tables
    rows = ["| workload | hosts | ssh workers | median s | min-max s | run's CPU ms/host | machine CPU ms/host "
            "| ratio to 0 workers |", "|---|---|---|---|---|---|---|---|"]
    counts = [int(k) for k in args.workers.split(",")]
    try:
        for workload in args.workloads.split(","):
            for n in (int(x) for x in args.hosts.split(",")):
                d = work / f"{workload}-{n}"
                base = bench.prepare("opsrunner", workload, bench.hosts(n), d)
                results: dict[int, list[tuple[float, float, float]]] = {k: [] for k in counts}
                for k in counts:
                    timed([[*base, "--ssh-workers", str(k)]], d)  # warm-up
                for rep in range(args.reps):
                    for k in counts[rep % len(counts):] + counts[:rep % len(counts)]:
                        results[k].append(timed([[*base, "--ssh-workers", str(k)]], d))
                first = statistics.median(w for w, _, _ in results[counts[0]])
                for k, runs in results.items():
                    walls = [w for w, _, _ in runs]
                    med = statistics.median(walls)
                    rows.append(f"| {workload} | {n} | {k} | {med:.2f} | {min(walls):.2f}-{max(walls):.2f} | "
                                f"{statistics.median(c for _, _, c in runs) * 1000 / n:.1f} | "
                                f"{statistics.median(m for _, m, _ in runs) * 1000 / n:.1f} | {med / first:.2f}x |")
                print("\n".join(rows[-len(counts):]), flush=True)
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.reps} timed runs per cell after one warm-up each, alternating; {os.cpu_count()} CPUs.\n"
          + "\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
