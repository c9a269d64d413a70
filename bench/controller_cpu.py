"""The controller's own CPU (its process alone: not the ssh workers, agents or hosts) and its
wall time from its first import to its exit, for opsrunner checkouts side by side on the
bench's restart, alternating run by run on the same hosts (each its own sshd and /proc).

    .venv/bin/python bench/controller_cpu.py --trees /tmp/wt/before,. --hosts 50 --reps 7 -- --ssh-workers 2
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench  # noqa: E402

#: Set in a timed run's environment: the file it appends "CPU_S WALL_S" to.
OUT_VAR = "OPSRUNNER_BENCH_CPU_OUT"


def _timed_cli() -> None:
    """In a timed run: `opsrunner ARGS` as the command runs it (one command, then exit), with
    this process's CPU and wall time written at its end."""
    started = time.perf_counter()
    from opsrunner import cli

    cli._ONE_COMMAND_PROCESS = True  # as cli.run() does: the ssh workers' seed, the frozen heap
    code = cli.main(sys.argv[2:])
    used = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ[OUT_VAR], "a") as out:
        out.write(f"{used.ru_utime + used.ru_stime:.4f} {time.perf_counter() - started:.4f}\n")
    os._exit(code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=str(ROOT), help="opsrunner checkouts, comma-separated")
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--settle", type=float, default=0.0, help="the restart's launch settle")
    parser.add_argument("extra", nargs="*", help="more arguments to `opsrunner play` (after --)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-ctlcpu-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [], args.reps, True)
    bench.own_tables = True
    bench.launch_settle = args.settle
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    runs: dict[Path, list[tuple[float, float]]] = {t: [] for t in trees}
    try:
        hosts = bench.hosts(args.hosts)
        commands = {}
        for i, tree in enumerate(trees):
            d = work / f"t{i}"
            command = bench.prepare("opsrunner", "restart", hosts, d)
            commands[tree] = (d, [sys.executable, __file__, "--timed-cli", *command[3:], *args.extra, "--no-history"])
        for rep in range(args.reps + 1):  # the first round warms up
            for tree in trees if rep % 2 else trees[::-1]:
                d, command = commands[tree]
                out = d / "cpu.txt"
                out.unlink(missing_ok=True)
                env = dict(os.environ, PYTHONPATH=str(tree), **{OUT_VAR: str(out)})
                env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as on a user's machine
                subprocess.run(command, cwd=d, env=env, stdout=subprocess.DEVNULL, check=True)
                if rep:
                    cpu, wall = (float(x) for x in out.read_text().split())
                    runs[tree].append((cpu, wall))
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print("| checkout | controller CPU ms/host (median, min) | wall s (median, min-max) |\n|---|---|---|")
    for tree, values in runs.items():
        cpus, walls = [c * 1000 / args.hosts for c, _ in values], [w for _, w in values]
        print(f"| {tree} | {statistics.median(cpus):.2f} ({min(cpus):.2f}) | "
              f"{statistics.median(walls):.3f} ({min(walls):.2f}-{max(walls):.2f}) |")
    print(f"\nrestart, {args.hosts} hosts, {args.reps} runs each after a warm-up, alternating; "
          f"load average {os.getloadavg()[0]:.1f} at the end.")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--timed-cli"]:
        _timed_cli()
    raise SystemExit(main())
