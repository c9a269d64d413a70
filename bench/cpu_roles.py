"""CPU per process role of one run, from perf: the bench's hosts share this machine, so a
run's time follows what every process on it costs. Record and read it so:

    perf record -a -F 1999 -e cpu-clock -e sched:sched_process_fork -e sched:sched_process_exec \
        -o perf.data -- env PYTHONPATH=. .venv/bin/python -m opsrunner play pb.yml -i inv.yml -f 50
    perf script -i perf.data -F comm,pid,tid,event,trace > perf.txt
    python3 bench/cpu_roles.py perf.txt 1999 50      # samples file, sampling rate, hosts

Roles: the controller (the tgid that exec'd env), sshd, shells, the job (sleep), a launch's
supervisor (python3.11 exec'd from a worker via /proc/self/exe), agents (python3 exec'd from a
shell) and agent workers (python3 forked without an exec)."""

from __future__ import annotations

import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"\s*(.+?)\s+(\d+)/(\d+)\s+(\S+):\s*(.*)")


def role(tgid: int, comm: str, controller: int | None, execs: dict[int, list[str]]) -> str:
    if tgid == controller:
        return "controller"
    ran = execs.get(tgid, [])
    if comm.startswith("sshd"):
        return "sshd"
    if comm in ("bash", "sh"):
        return "shell"
    if any(e.endswith("sleep") for e in ran):
        return "job (sleep)"
    if any("python3.11" in e for e in ran):
        return "supervisor"
    if any("python3" in e for e in ran):
        return "agent (start and loop)"
    if comm.startswith("python3"):
        return "agent worker (forked)"
    return "idle" if comm == "swapper" else "other: " + comm


def main() -> int:
    path, rate, hosts = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    execs: dict[int, list[str]] = defaultdict(list)
    samples: Counter[tuple[int, str]] = Counter()
    controller = None
    with open(path) as fh:
        for line in fh:
            m = LINE.match(line)
            if not m:
                continue
            comm, tgid, _tid, event, rest = m.groups()
            if event == "sched:sched_process_exec":
                found = re.search(r"filename=(\S+)", rest)
                if found:
                    execs[int(tgid)].append(found.group(1))
                    if controller is None and found.group(1).endswith("/env"):
                        controller = int(tgid)
            elif event == "cpu-clock":
                samples[(int(tgid), comm)] += 1
    totals: Counter[str] = Counter()
    for (tgid, comm), count in samples.items():
        totals[role(tgid, comm, controller, execs)] += count
    for name, count in totals.most_common():
        print(f"{name:28s} {count / rate:6.2f} CPU-s  {1000 * count / rate / hosts:6.1f} ms/host")
    print(f"busy total {sum(v for k, v in totals.items() if k != 'idle') / rate:.2f} CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
