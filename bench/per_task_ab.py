"""Per-task cost of two checkouts side by side, over the bench's private sshd on 127.0.0.1.

For each checkout (a directory holding an `opsrunner` package), alternating, PAIRS times:
(T[301 tasks] - T[1 task]) / 300 of `opsrunner play` on one host (`command: true`), and the
controller's CPU for the same difference. Then the engine's own CPU a task: the main thread's
CPU outside the agent calls, from a probe around AgentSession.call, over 1,000 tasks.

Each pair is followed by the floor a task cannot go below on that machine at that moment,
measured with the same tree: the same command's round trip through an open agent over the
same sshd with no engine at all (`run_command(["true"])`, median of 200), and the posix_spawn
and wait of `true` alone (what the agent's worker does for it, median of 200). The report
gives each tree's per-task figure, the floor, and the engine's share above it (per-task -
round trip).

    .venv/bin/python bench/per_task_ab.py OLD_TREE NEW_TREE [--pairs 9]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import Bench  # noqa: E402

PROBE = r"""
import json, os, sys, threading, time
from opsrunner.connections import agent
inside = [0.0]
call = agent.AgentSession.call
def timed(self, *a, **k):
    if threading.current_thread() is not threading.main_thread():
        return call(self, *a, **k)
    t = time.thread_time()
    try:
        return call(self, *a, **k)
    finally:
        inside[0] += time.thread_time() - t
agent.AgentSession.call = timed
import atexit
atexit.register(lambda: open(os.environ["PROBE_OUT"], "w").write(json.dumps(
    {"main": time.thread_time(), "inside": inside[0]})))
from opsrunner.cli import run
sys.argv = ["opsrunner", "play", sys.argv[1] + "/pb.yml", "-i", sys.argv[1] + "/inv.yml", "-f", "1"]
run()
"""


FLOOR = r"""
import json, os, statistics, sys, time
from opsrunner.connections.base import ConnectionSpec
from opsrunner.connections.ssh import SSHConnection
host = json.loads(open(sys.argv[1] + "/inv.yml").read())["all"]["hosts"]["node00"]
spec = ConnectionSpec(name="floor", host=host["host"], port=host["port"], user=host["user"],
                      key_file=host["key_file"], known_hosts_file=host["known_hosts_file"])
conn = SSHConnection(spec)
def median_ms(fn, reps=200):
    values = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        values.append(time.perf_counter() - start)
    return statistics.median(values) * 1000
try:
    conn.run_command(["true"], timeout=3600)  # the agent started
    trip = median_ms(lambda: conn.run_command(["true"], timeout=3600))
    spawn = median_ms(lambda: os.waitpid(os.posix_spawnp("true", ["true"], os.environ), 0))
finally:
    conn.close()
print(json.dumps({"trip": trip, "spawn": spawn}))
"""


def floor(tree: str, d: Path) -> dict[str, float]:
    """The round trip of `true` through an open agent with no engine, and its spawn alone (ms)."""
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", FLOOR, str(d)], env=env, cwd=d, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def play(tree: str, d: Path, probe: Path | None = None) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-m", "opsrunner", "play", str(d / "pb.yml"), "-i", str(d / "inv.yml"), "-f", "1"]
    if probe is not None:
        env["PROBE_OUT"] = str(probe)
        argv = [sys.executable, "-c", PROBE, str(d)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{tree}: opsrunner play failed ({status})")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs=2)
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()
    # Absolute: each play runs in its own temp directory, where a relative PYTHONPATH finds nothing.
    args.trees = [str(Path(tree).resolve()) for tree in args.trees]
    work = Path(tempfile.mkdtemp(prefix="opsrunner-ab-"))
    bench = Bench(work, Path(sys.executable).parent.parent, [1], 1, True)
    try:
        hosts = bench.hosts(1)
        dirs = {}
        for count in (1, 301, 1001):
            d = work / f"t{count}"
            bench.prepare("opsrunner", "trivial", hosts, d)
            (d / "pb.yml").write_text("- hosts: all\n  tasks:\n" + "".join(
                f"    - {{name: t{i}, command: 'true'}}\n" for i in range(count)))
            dirs[count] = d
        wall: dict[str, list[float]] = {t: [] for t in args.trees}
        cpu: dict[str, list[float]] = {t: [] for t in args.trees}
        floors: dict[str, list[dict[str, float]]] = {t: [] for t in args.trees}
        for tree in args.trees:
            play(tree, dirs[1]), play(tree, dirs[301])  # warm: caches, bytecode, the agent's copy
        for i in range(args.pairs):
            for tree in args.trees if i % 2 == 0 else args.trees[::-1]:
                many, many_cpu = play(tree, dirs[301])
                one, one_cpu = play(tree, dirs[1])
                wall[tree].append((many - one) / 300 * 1000)
                cpu[tree].append((many_cpu - one_cpu) / 300 * 1000)
                floors[tree].append(floor(tree, dirs[1]))
        for tree in args.trees:
            engine = []
            for _ in range(5):
                got = {}
                for count in (1, 1001):
                    play(tree, dirs[count], work / "probe.json")
                    got[count] = json.loads((work / "probe.json").read_text())
                engine.append(((got[1001]["main"] - got[1001]["inside"]) - (got[1]["main"] - got[1]["inside"]))
                              / 1000 * 1000)
            trip = statistics.median(f["trip"] for f in floors[tree])
            trips = " ".join(f"{f['trip']:.2f}" for f in floors[tree])
            above = statistics.median(w - f["trip"] for w, f in zip(wall[tree], floors[tree], strict=True))
            print(f"{tree}: per-task {statistics.median(wall[tree]):.3f} ms (pairs: "
                  f"{' '.join(f'{x:.2f}' for x in sorted(wall[tree]))}), controller CPU "
                  f"{statistics.median(cpu[tree]):.3f} ms, engine CPU (main thread outside the agent calls) "
                  f"{statistics.median(engine):.3f} ms")
            print(f"{tree}: floor: `true`'s round trip through the open agent, no engine {trip:.3f} ms "
                  f"(after each pair: {trips}), "
                  f"its posix_spawn alone {statistics.median(f['spawn'] for f in floors[tree]):.3f} ms; "
                  f"per-task above the round trip (pair by pair, median) {above:.3f} ms")
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
