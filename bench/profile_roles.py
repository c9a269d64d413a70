"""Where one run's CPU goes, per process role (bench/cpu_roles.py), for each tool, on the
bench's hosts with their own process tables: one warm-up run, then `perf record` around one
run. Needs root (PID namespaces, perf -a) and perf.

    .venv/bin/python bench/profile_roles.py --tools opsrunner,fabric --hosts 50 --workload restart

The samples and the roles table of each tool are written to --out (default bench/results).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench, own_tables_bench  # noqa: E402

RATE = "1999"


def profile(bench: Bench, tool: str, workload: str, hosts: int, out: Path) -> str:
    """The roles table of one perf-recorded run of `tool` (after a warm-up run)."""
    d = bench.work / f"profile-{tool}"
    cmd = bench.prepare(tool, workload, bench.hosts(hosts), d)
    bench.time_run(cmd, d)  # warm-up: caches, as in the bench
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    data, samples = out / f"perf-{tool}-{workload}-{hosts}.data", out / f"perf-{tool}-{workload}-{hosts}.txt"
    subprocess.run(["perf", "record", "-q", "-a", "-F", RATE, "-e", "cpu-clock", "-e", "sched:sched_process_fork",
                    "-e", "sched:sched_process_exec", "-o", str(data), "--", "env", *cmd],
                   cwd=d, env=env, stdout=subprocess.DEVNULL, check=True)
    with samples.open("w") as fh:
        subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,pid,tid,event,trace"], stdout=fh,
                       stderr=subprocess.DEVNULL, check=True)
    data.unlink()
    return subprocess.run([sys.executable, str(ROOT / "bench" / "cpu_roles.py"), str(samples), RATE, str(hosts)],
                          capture_output=True, text=True, check=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--others-venv", type=Path, default=Path("/tmp/bench-venv"))
    parser.add_argument("--tools", default="opsrunner,fabric")
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--workload", default="restart")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--opsrunner-launch-settle", type=float, default=None, metavar="S",
                        help="the restart's launch_detached settle (default: the module's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with own_tables_bench("opsrunner-profile-", args.others_venv, args.hosts) as bench:
        bench.launch_settle = args.opsrunner_launch_settle
        for tool in args.tools.split(","):
            table = profile(bench, tool, args.workload, args.hosts, args.out)
            (args.out / f"roles-{tool}-{args.workload}-{args.hosts}.txt").write_text(table)
            print(f"== {tool}, {args.workload}, {args.hosts} hosts\n{table}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
