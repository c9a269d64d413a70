"""Where a run's wall time goes: the bench's opsrunner workload, its phases from `--json-events`.

For each timed run (after one warm-up, on the same hosts): the controller's start (the process
started to the play's start: Python, imports, inventory and playbook), each task's span (from
its start to the last host's end; with the linear strategy the next task starts there), and the
end (the last task's end to the process's exit: the connections' close). The table gives the
median of each phase and the median task duration of a host within it.

    .venv/bin/python bench/timeline.py --hosts 50 --workload restart --reps 5 --own-process-tables
    bench/on_device.sh bench/timeline.py --hosts 50 --reps 5 --own-process-tables --settle 0
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench  # noqa: E402

Phases = dict[str, tuple[float, float]]  # phase: (wall s, a host's median task s)


def phases(events: list[dict[str, object]], started: float, ended: float) -> Phases:
    """The phases of one run from its json events and the process's start and end times."""
    starts: dict[str, float] = {}
    ends: dict[str, list[float]] = defaultdict(list)
    durations: dict[str, list[float]] = defaultdict(list)
    play_start = None
    for event in events:
        kind, at = event.get("event"), float(event["time"])  # type: ignore[arg-type]
        if kind == "play_start" and play_start is None:
            play_start = at
        elif kind == "task_start":
            starts.setdefault(str(event["task"]), at)
        elif kind == "task_end":
            ends[str(event["task"])].append(at)
            durations[str(event["task"])].append(float(event.get("duration_s") or 0))  # type: ignore[arg-type]
    out: Phases = {"controller start": (float(play_start or started) - started, 0.0)}
    last = float(play_start or started)
    for task, at in starts.items():
        last_end = max(ends[task], default=at)
        out[f"task {task}"] = (last_end - at, statistics.median(durations[task] or [0.0]))
        last = max(last, last_end)
    out["end (close)"] = (ended - last, 0.0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--workload", default="restart", choices=("restart", "trivial"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--settle", type=float, default=None, help="the launch's settle (default: the module's)")
    parser.add_argument("--strategy", choices=("linear", "free"), default=None)
    parser.add_argument("--own-process-tables", action="store_true")
    parser.add_argument("extra", nargs="*", help="more arguments to `opsrunner play` (after --)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-timeline-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [], args.reps, True)
    bench.own_tables = args.own_process_tables
    bench.launch_settle = args.settle
    bench.strategy = args.strategy
    runs: list[Phases] = []
    walls: list[float] = []
    try:
        d = work / "run"
        command = bench.prepare("opsrunner", args.workload, bench.hosts(args.hosts), d)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as on a user's machine
        for rep in range(args.reps + 1):
            events_file = d / f"events{rep}.jsonl"
            started = time.time()
            proc = subprocess.run([*command, *args.extra, "--json-events", str(events_file), "--no-history"],
                                  cwd=d, env=env, capture_output=True, text=True)
            ended = time.time()
            if proc.returncode:
                print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
                return 1
            if rep:  # the first is a warm-up: the hosts' first launch, files not yet there
                events = [json.loads(line) for line in events_file.read_text().splitlines()]
                runs.append(phases(events, started, ended))
                walls.append(ended - started)
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.workload}, {args.hosts} hosts, {args.reps} runs, {os.cpu_count()} cores; "
          f"wall median {statistics.median(walls):.3f} s ({min(walls):.2f}-{max(walls):.2f})\n")
    print("| phase | wall s (median) | a host's task s (median) |\n|---|---|---|")
    for name in runs[0]:
        wall = statistics.median(r[name][0] for r in runs)
        task = statistics.median(r[name][1] for r in runs)
        print(f"| {name} | {wall:.3f} | {task:.3f} |" if task else f"| {name} | {wall:.3f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
