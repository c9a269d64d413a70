"""Variants of one opsrunner workload side by side, on the same hosts, alternating run by run:
checkouts of opsrunner (`--trees`, e.g. a worktree of the commit before a change and this
one), the restart's launch `settle` (`--settles`, `default` for the module's own) and the
play's strategy (`--strategies linear,free`).

Workloads: the bench's `restart` and `trivial` (workloads.py), and `deploy-tree`: deploy_code
of a tree of `--tree-files` files, `--tree-bytes` in all, when the hosts already have it (the
state of every redeploy that changes little: the controller's cost is its local digests).

    .venv/bin/python bench/variants.py --hosts 50 --workload restart --settles default,0 --reps 5
    .venv/bin/python bench/variants.py --hosts 50 --workload deploy-tree --trees /tmp/wt/before,. --reps 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench  # noqa: E402
from bench.shards import timed  # noqa: E402


def tree_playbook(work: Path, files: int, size: int) -> str:
    """A source tree of `files` files (`size` bytes in all, 20 folders), old enough that its
    digests may be kept, and a play that deploys it to each host."""
    src = work / "src"
    old = time.time() - 100
    for i in range(files):
        path = src / f"pkg{i % 20}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size // files))
        os.utime(path, (old, old))
    dest = f"{work}/targets/{{{{ inventory_hostname }}}}/code/"
    return f"- hosts: all\n  tasks:\n    - deploy_code: {{src: {src}/, dest: \"{dest}\"}}\n"


Key = tuple[Path, "float | None", str]


def _table(times: dict[Key, list[tuple[float, float, float]]], hosts: int) -> str:
    """Median wall time, its range, the controller's CPU a host, and the ratio to the first variant."""
    lines = ["| checkout | settle | strategy | median s | min-max s | controller CPU ms/host | ratio |",
             "|---|---|---|---|---|---|---|"]
    first = statistics.median(t[0] for t in next(iter(times.values())))
    for (tree, settle, strategy), runs in times.items():
        walls = [t[0] for t in runs]
        median = statistics.median(walls)
        cpu = statistics.median(t[2] for t in runs) * 1000 / hosts
        lines.append(f"| {tree} | {'default' if settle is None else f'{settle:g}'} | {strategy} | {median:.3f} | "
                     f"{min(walls):.2f}-{max(walls):.2f} | {cpu:.1f} | {median / first:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--workload", default="restart", choices=("restart", "trivial", "deploy-tree"))
    parser.add_argument("--trees", default=str(ROOT), help="opsrunner checkouts, comma-separated")
    parser.add_argument("--settles", default="default", help="the launch's settle values: default or seconds")
    parser.add_argument("--strategies", default="linear", help="the play's strategies: linear, free")
    parser.add_argument("--no-launch-check", action="store_true",
                        help="the restart without its check before the kill (for checkouts from before it)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--tree-files", type=int, default=500)
    parser.add_argument("--tree-bytes", type=int, default=10_000_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-variants-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [], args.reps, True)
    bench.own_tables = True
    bench.launch_check = not args.no_launch_check
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    settles = [None if s == "default" else float(s) for s in args.settles.split(",")]
    try:
        hosts = bench.hosts(args.hosts)
        runs: dict[Key, tuple[list[str], Path]] = {}
        for tree, settle, strategy in product(trees, settles, args.strategies.split(",")):
            bench.launch_settle = settle
            bench.strategy = None if strategy == "linear" else strategy
            d = work / f"v{len(runs)}"
            cmd = bench.prepare("opsrunner", "trivial" if args.workload == "deploy-tree" else args.workload, hosts, d)
            if args.workload == "deploy-tree":
                (d / "pb.yml").write_text(tree_playbook(work, args.tree_files, args.tree_bytes))
            runs[(tree, settle, strategy)] = ([*cmd, "--no-history"], d)
        times: dict[Key, list[tuple[float, float, float]]] = {k: [] for k in runs}
        for rep in range(args.reps + 1):  # the first round warms up (and deploys the tree)
            order = list(runs) if rep % 2 else list(runs)[::-1]
            for key in order:
                cmd, d = runs[key]
                result = timed([cmd], d, pythonpath=key[0])
                if rep:
                    times[key].append(result)
        print(_table(times, args.hosts))
        print(f"\n{args.workload}, {args.hosts} hosts, {args.reps} timed runs each after a warm-up, alternating; "
              f"load average {os.getloadavg()[0]:.1f} at the end.")
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
