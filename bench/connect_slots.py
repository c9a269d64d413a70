"""Does the default of --connect-slots cost anything where it does not bind? One opsrunner
workload on the same hosts (own process tables) with each value of --connect-slots, the
values alternating, REPS timed runs each after one warm-up.

    .venv/bin/python bench/connect_slots.py --hosts 50 --slots 32,64 --reps 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import own_tables_bench  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--others-venv", type=Path, default=Path("/tmp/bench-venv"))
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--slots", default="32,64")
    parser.add_argument("--workload", default="restart")
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    with own_tables_bench("opsrunner-slots-", args.others_venv, args.hosts) as bench:
        d = bench.work / "slots"
        cmd = bench.prepare("opsrunner", args.workload, bench.hosts(args.hosts), d)
        variants = {s: [*cmd, "--connect-slots", s] for s in args.slots.split(",")}
        for variant in variants.values():
            bench.time_run(variant, d)  # warm-up
        times: dict[str, list[float]] = {s: [] for s in variants}
        machine: dict[str, list[float]] = {s: [] for s in variants}
        for _ in range(args.reps):
            for slots, variant in variants.items():
                times[slots].append(bench.time_run(variant, d))
                machine[slots].append(bench.usage[-1].machine_cpu_s)
    for slots in variants:
        print(f"{args.workload} {args.hosts} hosts --connect-slots {slots}: median "
              f"{statistics.median(times[slots]):.2f} s {sorted(round(t, 2) for t in times[slots])}, machine CPU "
              f"{statistics.median(machine[slots]):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
