"""Benchmark: opsrunner against ansible-core, pyinfra and a plain Fabric script, side by side.

Workloads: 10 trivial tasks (`true`), and a 5-step restart (copy a 20 KB file, remove a
cache dir, kill by pidfile, launch detached, verify one process and a log), on 1, 10 and
50 inventory hosts whose names all alias one private sshd on 127.0.0.1 (started here, with
its own keys). Tools run alternately, in a rotating order; the report gives medians,
min-max and ratios against opsrunner. Also measured: opsrunner's per-task overhead over an
open connection ((T[301 tasks] - T[1 task]) / 300 on one host, the median of 7 pairs of
back-to-back runs).

    python bench/bench.py --others-venv /tmp/bench-venv      # see bench/README.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workloads import (  # noqa: E402
    ansible_playbook,
    fabric_script,
    opsrunner_playbook,
    pyinfra_deploy,
)
from tests.sshd import find_sshd, free_port, start_sshd, wait_listening  # noqa: E402

if TYPE_CHECKING:
    from opsrunner.connections.base import ConnectionSpec

TOOLS = ("opsrunner", "ansible-core", "pyinfra", "fabric")


class Bench:
    def __init__(self, work: Path, others: Path, hosts_counts: list[int], reps: int, clean_home: bool) -> None:
        self.work = work
        self.others = others
        self.hosts_counts = hosts_counts
        self.reps = reps
        # Sessions get a clean HOME: this machine's root ~/.bashrc runs `pyenv init` (~170 ms),
        # which bash sources for every ssh command and which would swamp every tool's own cost.
        (work / "home").mkdir()
        # 200 hosts open 200 connections at once (and each its agent session): raise sshd's limits.
        limits = ("MaxStartups 1000:30:1000", "MaxSessions 1000")
        self.sshd = start_sshd(work / "sshd", (*limits, f"SetEnv HOME={work / 'home'}") if clean_home else limits)
        self.root = work / "targets"
        self.root.mkdir()
        self.payload = os.urandom(20 * 1024)
        self.markers: list[str] = []
        #: Per timed run: the tool's peak controller RSS (MiB), the controller's CPU seconds
        #: (its process and the children it waited for) and the whole machine's busy CPU seconds.
        self.usage: list[RunUsage] = []
        self.failures: list[str] = []
        self.ansible_max_hosts = 10**6
        self.own_tables = False
        self.host_sshds: list[tuple[int, subprocess.Popen[bytes]]] = []
        #: opsrunner's launch `settle` in the restart (None: the module's default).
        self.launch_settle: float | None = None
        #: opsrunner's restart checks that its new job can start before the kill, as the role does.
        self.launch_check = True
        #: opsrunner's play strategy in both workloads (None: the default, linear).
        self.strategy: str | None = None

    def hosts(self, n: int) -> list[dict[str, object]]:
        out = []
        for i in range(n):
            marker = f"1000.{uuid.uuid4().int % 10**9:09d}"
            self.markers.append(marker)
            out.append({"name": f"node{i:02d}", "marker": marker, "port": self.port_of(i),
                        "user": self.sshd.user, "key": str(self.sshd.key_file)})
        return out

    def port_of(self, i: int) -> int:
        """Host i's sshd: the shared one, or with --own-process-tables one of its own."""
        if not self.own_tables:
            return self.sshd.port
        while len(self.host_sshds) <= i:
            self.host_sshds.append(self.start_host_sshd(len(self.host_sshds)))
        return self.host_sshds[i][0]

    def start_host_sshd(self, i: int) -> tuple[int, subprocess.Popen[bytes]]:
        """An sshd (same keys and settings as the shared one, another port) as PID 1 of a PID
        namespace with its own /proc: what a host's processes see, e.g. kill_old's scan of the
        process table, is that host's own processes, as on separate machines. They still share
        this machine's CPUs. --kill-child: stopping it ends the namespace and all inside."""
        port = free_port()
        base = (self.sshd.root / "sshd_config").read_text().splitlines()
        config = self.sshd.root / f"sshd_config.{i}"
        config.write_text("\n".join([f"Port {port}", *(line for line in base if not line.startswith("Port ")
                                                        and not line.startswith("PidFile "))], ) + "\n")
        log = self.sshd.root / f"sshd.{i}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                     find_sshd() or "sshd", "-D", "-e", "-f", str(config)], stdout=out, stderr=out)
        with self.sshd.known_hosts.open("a") as known:
            known.write(f"[127.0.0.1]:{port} {self.sshd.host_pub}\n")
        wait_listening(proc, port, log)
        return port, proc

    # -- per tool: files and the command line --------------------------------------------
    def tool_root(self, tool: str) -> Path:
        """Each tool works in its own target directories, with its own job markers: opsrunner
        rightly refuses to kill a job that another tool's run wrote into its pidfile."""
        root = self.root / tool
        if not root.exists():
            root.mkdir()
            (root / "payload.bin").write_bytes(self.payload)
        return root

    def prepare(self, tool: str, workload: str, hosts: list[dict[str, object]], d: Path) -> list[str]:
        d.mkdir(parents=True)
        n = str(len(hosts))
        root = self.tool_root(tool)
        if tool == "opsrunner":
            inv = {"all": {"hosts": {h["name"]: {"host": "127.0.0.1", "port": h["port"], "user": h["user"],
                                                 "key_file": h["key"], "marker": h["marker"],
                                                 "known_hosts_file": str(self.sshd.known_hosts)}
                                     for h in hosts}}}
            (d / "inv.yml").write_text(json.dumps(inv))
            (d / "pb.yml").write_text(opsrunner_playbook(workload, root, self.launch_settle,
                                                         self.strategy, self.launch_check))
            return [sys.executable, "-m", "opsrunner", "play", str(d / "pb.yml"), "-i", str(d / "inv.yml"),
                    "-f", n]
        if tool == "ansible-core":
            ssh_args = (f"-o UserKnownHostsFile={self.sshd.known_hosts} -o StrictHostKeyChecking=yes "
                        f"-o ControlMaster=auto -o ControlPersist=600 -o ControlPath={self.work}/cp-%C")
            lines = [f"{h['name']} ansible_host=127.0.0.1 ansible_port={h['port']} ansible_user={h['user']} "
                     f"ansible_ssh_private_key_file={h['key']} marker={h['marker']}" for h in hosts]
            (d / "inv.ini").write_text("[all]\n" + "\n".join(lines) + "\n\n[all:vars]\n"
                                       f"ansible_python_interpreter=/usr/bin/python3\n"
                                       f"ansible_ssh_common_args='{ssh_args}'\n")
            (d / "ansible.cfg").write_text("[defaults]\nhost_key_checking = True\nstdout_callback = default\n"
                                           "[ssh_connection]\npipelining = True\n")
            (d / "pb.yml").write_text(ansible_playbook(workload, root))
            return [str(self.others / "bin" / "ansible-playbook"), "-i", str(d / "inv.ini"), str(d / "pb.yml"),
                    "-f", n]
        if tool == "pyinfra":
            entries = ", ".join(
                f"({h['name']!r}, {{'ssh_hostname': '127.0.0.1', 'ssh_port': {h['port']}, 'ssh_user': {h['user']!r}, "
                f"'ssh_key': {h['key']!r}, 'ssh_known_hosts_file': {str(self.sshd.known_hosts)!r}, "
                f"'marker': {h['marker']!r}}})" for h in hosts)
            (d / "inventory.py").write_text(f"hosts = [{entries}]\n")
            (d / "deploy.py").write_text(pyinfra_deploy(workload, root))
            return [str(self.others / "bin" / "pyinfra"), str(d / "inventory.py"), str(d / "deploy.py"), "-y",
                    "--parallel", n]
        (d / "fab.py").write_text(fabric_script(workload, root, hosts))
        return [sys.executable, str(d / "fab.py")]

    def time_run(self, cmd: list[str], cwd: Path) -> float:
        """Wall seconds of one run; its RunUsage goes to self.usage."""
        env = dict(os.environ, ANSIBLE_CONFIG=str(cwd / "ansible.cfg"), PYTHONPATH=str(ROOT))
        # Bytecode is cached as on any user's machine (a session may have turned that off:
        # then every run would compile opsrunner's own modules, ~0.1 s, but not the others').
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with tempfile.TemporaryFile() as out:
            busy = busy_ticks()
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
            elapsed = time.perf_counter() - start
            machine = (busy_ticks() - busy) / os.sysconf("SC_CLK_TCK")
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                out.seek(0)
                tail = out.read()[-4000:].decode(errors="replace")
                raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}):\n{tail}")
        self.usage.append(RunUsage(usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, machine))
        return elapsed

    def run_case(self, workload: str, n: int, tools: tuple[str, ...]) -> tuple[dict[str, list[float]],
                                                                              dict[str, RunUsage]]:
        """Times per tool, and each tool's RunUsage (medians over the runs)."""
        if n > self.ansible_max_hosts:
            tools = tuple(t for t in tools if t != "ansible-core")
        cmds = {}
        used: dict[str, list[RunUsage]] = {t: [] for t in tools}
        for tool in tools:
            d = self.work / f"{workload}-{n}-{tool}"
            cmds[tool] = (self.prepare(tool, workload, self.hosts(n), d), d)
            try:
                self.time_run(*cmds[tool])  # warm-up: caches, ControlPersist masters
            except RuntimeError as exc:  # reported like a timed run's failure; the bench goes on
                self.failures.append(f"{workload} {n} hosts, {tool} (warm-up): {exc}")
                print("FAILED:", self.failures[-1], flush=True)
        times: dict[str, list[float]] = {t: [] for t in tools}
        for rep in range(self.reps):
            order = tools[rep % len(tools):] + tools[:rep % len(tools)]
            for tool in order:
                try:
                    times[tool].append(self.time_run(*cmds[tool]))
                except RuntimeError as exc:  # reported with the table, not hidden, not retried
                    self.failures.append(f"{workload} {n} hosts, {tool}: {exc}")
                    print("FAILED:", self.failures[-1], flush=True)
                    continue
                used[tool].append(self.usage[-1])
        return times, {t: RunUsage.median(v) for t, v in used.items()}

    def call_latency(self) -> dict[str, float]:
        """On one open ssh connection: median ms of an agent call, a bare exec, a Python start."""
        from opsrunner.connections.base import ConnectionSpec
        from opsrunner.connections.ssh import SSHConnection

        spec = ConnectionSpec(name="latency", host="127.0.0.1", port=self.sshd.port, user=self.sshd.user,
                              key_file=str(self.sshd.key_file), known_hosts_file=str(self.sshd.known_hosts))
        conn = SSHConnection(spec)
        agent = conn.agent()

        def median_ms(fn: object, reps: int = 40) -> float:
            values = []
            for _ in range(reps):
                start = time.perf_counter()
                fn()  # type: ignore[operator]
                values.append(time.perf_counter() - start)
            return statistics.median(values) * 1000

        try:
            agent.call("read", {"paths": []})  # start it
            return {"agent call (read, no paths)": median_ms(lambda: agent.call("read", {"paths": []})),
                    "agent call (stat, 1 file)": median_ms(lambda: agent.call(
                        "stat", {"dest": str(self.tool_root("opsrunner")), "files": ["payload.bin"]})),
                    "bare exec `true` (channel + sh)": median_ms(lambda: conn.run(["true"])),
                    "bare exec `true` under the deadline watchdog": median_ms(
                        lambda: conn.run(["true"], timeout=3600), 20),
                    "agent exec `true` (run_command)": median_ms(lambda: conn.run_command(["true"], timeout=3600)),
                    "exec `python3 -S -c pass`": median_ms(lambda: conn.run(["python3", "-S", "-c", "pass"]), 20),
                    "local fork+exec of `true` (what an agent-side exec adds)": median_ms(
                        lambda: subprocess.run(["true"], check=True)),
                    **self.floor_latency(median_ms),
                    **self.connect_latency(spec)}
        finally:
            conn.close()

    @staticmethod
    def floor_latency(median_ms: Callable[[Callable[[], object]], float]) -> dict[str, float]:
        """What a task's round trip cannot go below, with no ssh in the way: the same agent exec
        of `true` on a local connection (the agent on pipes, as on a target), and the posix_spawn
        and wait of `true` that the agent's worker does for it."""
        from opsrunner.connections.base import ConnectionSpec
        from opsrunner.connections.local import LocalConnection

        def spawn_true() -> None:
            os.waitpid(os.posix_spawnp("true", ["true"], os.environ), 0)

        local = LocalConnection(ConnectionSpec(name="latency-local", kind="local"))
        try:
            local.run_command(["true"], timeout=3600)  # start its agent
            return {"agent exec `true` on a local connection (no ssh)": median_ms(
                        lambda: local.run_command(["true"], timeout=3600)),
                    "posix_spawn + wait of `true` (the command itself)": median_ms(spawn_true)}
        finally:
            local.close()

    def connect_latency(self, spec: ConnectionSpec) -> dict[str, float]:
        """Connect, then exec `true` on the first channel: opsrunner's connection (connections/
        tcp.py's socket) and paramiko's own connect (Nagle on), alternating, same key and host."""
        import paramiko

        from opsrunner.connections.ssh import SSHConnection

        def ours() -> None:
            conn = SSHConnection(spec)
            try:
                conn.run(["true"])
            finally:
                conn.close()

        def paramikos() -> None:
            client = paramiko.SSHClient()
            client.load_host_keys(str(self.sshd.known_hosts))
            try:
                client.connect("127.0.0.1", port=self.sshd.port, username=self.sshd.user,
                               key_filename=str(self.sshd.key_file), allow_agent=False, look_for_keys=False)
                chan = client.get_transport().open_session()
                chan.exec_command("true")
                chan.recv_exit_status()
            finally:
                client.close()

        values: dict[Callable[[], None], list[float]] = {ours: [], paramikos: []}
        for _ in range(10):
            for connect, times in values.items():
                start = time.perf_counter()
                connect()
                times.append((time.perf_counter() - start) * 1000)
        return {"connect + first command, opsrunner's socket": statistics.median(values[ours]),
                "connect + first command, paramiko's own connect": statistics.median(values[paramikos])}

    def per_task_overhead(self, command_exec: str = "auto", tasks: int = 301, pairs: int = 7) -> Overhead:
        """Median over `pairs` pairs of back-to-back runs on one host of
        (T[`tasks` tasks] - T[1 task]) / (`tasks` - 1); `command_exec` as the host var says (auto:
        the agent runs the commands here, as there is no wrapper chain; bare: an exec of its own
        per command, under the deadline watchdog). The two runs of a pair follow each other, so
        a load that changes between pairs stays out of the difference (two series of runs, one
        after the other, took it in), and the noise of a run's start is divided by `tasks` - 1."""
        hosts = self.hosts(1)
        cmds = {}
        for count in (1, tasks):
            d = self.work / f"overhead-{command_exec}-{count}"
            cmd = self.prepare("opsrunner", "trivial", hosts, d)
            inv = json.loads((d / "inv.yml").read_text())
            for host in inv["all"]["hosts"].values():
                host["command_exec"] = command_exec
            (d / "inv.yml").write_text(json.dumps(inv))
            (d / "pb.yml").write_text("- hosts: all\n  tasks:\n" + "".join(
                f"    - {{name: t{i}, command: 'true'}}\n" for i in range(count)))
            cmds[count] = (cmd, d)
            self.time_run(cmd, d)
        ticks = cpu_ticks()
        differences, controller = [], []
        for _ in range(pairs):
            many = self.time_run(*cmds[tasks])
            many_cpu = self.usage[-1].controller_cpu_s
            one = self.time_run(*cmds[1])
            differences.append((many - one) / (tasks - 1))
            controller.append((many_cpu - self.usage[-1].controller_cpu_s) / (tasks - 1))
        return Overhead(statistics.median(differences), tasks, pairs, os.getloadavg()[0], steal_percent(ticks),
                        statistics.median(controller))

    def cleanup(self) -> None:
        for marker in self.markers:
            subprocess.run(["pkill", "-f", f"^sleep {marker}$"], check=False)
        for _, proc in self.host_sshds:
            proc.kill()  # unshare --fork ignores SIGTERM; its death SIGKILLs the sshd, PID 1 inside
            proc.wait()
        self.sshd.stop()


@contextlib.contextmanager
def own_tables_bench(prefix: str, others: Path, hosts: int) -> Iterator[Bench]:
    """A Bench in a temp dir whose hosts have their own process tables; cleaned up after."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    bench = Bench(work, others, [hosts], 1, True)
    bench.own_tables = True
    try:
        yield bench
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class RunUsage:
    rss_mib: float  # the controller's peak RSS (its main process)
    controller_cpu_s: float  # user + system of the controller and the children it waited for
    machine_cpu_s: float  # busy CPU time of the whole machine (targets' sshd and processes too)

    @staticmethod
    def median(runs: list[RunUsage]) -> RunUsage:
        if not runs:
            return RunUsage(0.0, 0.0, 0.0)
        return RunUsage(statistics.median(r.rss_mib for r in runs), statistics.median(r.controller_cpu_s for r in runs),
                        statistics.median(r.machine_cpu_s for r in runs))


Cells = dict[tuple[str, int], tuple[dict[str, list[float]], dict[str, RunUsage]]]


def busy_ticks() -> int:
    """Busy CPU ticks of the whole machine so far (user, nice, system, irq, softirq; /proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:8]]
    return fields[0] + fields[1] + fields[2] + fields[5] + fields[6]


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) CPU ticks of this machine so far, from /proc/stat: on a VM, steal is the
    time the hypervisor gave this machine's CPUs to others (it slows every tool alike)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:9]]
    return fields[7], sum(fields)


def steal_percent(since: tuple[int, int]) -> float:
    steal, total = cpu_ticks()
    return 100.0 * (steal - since[0]) / max(1, total - since[1])


@dataclass(frozen=True)
class Overhead:
    seconds: float  # per task
    tasks: int
    pairs: int
    load_after: float  # the 1-minute load average when the measure ended
    steal: float  # percent of the machine's CPU time taken by the hypervisor meanwhile
    controller_cpu_s: float = 0.0  # per task: the controller's own CPU (the rest is the round trip's)


def report(all_times: Cells, overhead: dict[str, Overhead], reps: int, latency: dict[str, float]) -> str:
    lines = ["| workload | hosts | tool | median s | min-max s | ms per host | ratio to opsrunner | "
             "controller RSS MiB | controller CPU ms per host | machine CPU ms per host |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (workload, n), (times, used) in all_times.items():
        base = statistics.median(times["opsrunner"]) if times["opsrunner"] else float("nan")
        for tool, values in times.items():
            if not values:
                lines.append(f"| {workload} | {n} | {tool} | failed | | | | | | |")
                continue
            med = statistics.median(values)
            lines.append(f"| {workload} | {n} | {tool} | {med:.2f} | {min(values):.2f}-{max(values):.2f} | "
                         f"{med / n * 1000:.0f} | {med / base:.2f}x | {used[tool].rss_mib:.0f} | "
                         f"{used[tool].controller_cpu_s / n * 1000:.1f} | {used[tool].machine_cpu_s / n * 1000:.1f} |")
    lines.append("")
    for name, ms in latency.items():
        lines.append(f"- {name}: {ms:.2f} ms (median)")
    lines.append("")
    for mode, o in overhead.items():
        lines.append(f"opsrunner per-task overhead over an open connection, command_exec={mode}: "
                     f"{o.seconds * 1000:.2f} ms, of which the controller's CPU {o.controller_cpu_s * 1000:.2f} ms "
                     f"(median of {o.pairs} back-to-back pairs, (T[{o.tasks} tasks] "
                     f"- T[1 task]) / {o.tasks - 1}, one host; load average {o.load_after:.1f} at its end, "
                     f"steal {o.steal:.0f}%)")
    lines.append(f"{reps} timed runs per cell after one warm-up, tools alternating in rotating order.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--others-venv", type=Path, required=True,
                        help="venv with ansible-core and pyinfra from PyPI")
    parser.add_argument("--hosts", default="1,10,50")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--real-home", action="store_true",
                        help="keep the user's HOME (and so ~/.bashrc) in the ssh sessions")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--workloads", default="trivial,restart")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "latest.md")
    parser.add_argument("--own-process-tables", action="store_true",
                        help="each host its own sshd in its own PID namespace and /proc, as separate "
                             "machines (the shared sshd otherwise: every host sees every host's processes)")
    parser.add_argument("--ansible-max-hosts", type=int, default=10**6,
                        help="leave ansible-core out of cells with more hosts (its 50-host runs take minutes)")
    parser.add_argument("--no-overhead", action="store_true",
                        help="leave out the per-task overhead and call latency measures (for scale cells)")
    parser.add_argument("--opsrunner-launch-settle", type=float, default=None, metavar="S",
                        help="the restart's launch_detached settle (default: the module's, a 0.25 s watch for a "
                             "job that ends at once; 0 is the restart role's launch_settle, and like for like: "
                             "the other tools' launches return at once)")
    parser.add_argument("--opsrunner-no-launch-check", action="store_true",
                        help="leave out the restart's check that the new job can start before the kill (the "
                             "role makes it; a checkout from before check_only needs this)")
    parser.add_argument("--opsrunner-strategy", choices=("linear", "free"), default=None,
                        help="opsrunner's play strategy (default: linear, its default; free: each host on "
                             "its own, as the Fabric script's threads)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="opsrunner-bench-"))
    started = cpu_ticks()
    bench = Bench(work, args.others_venv, [int(x) for x in args.hosts.split(",")], args.reps,
                  not args.real_home)
    bench.ansible_max_hosts = args.ansible_max_hosts
    bench.launch_settle = args.opsrunner_launch_settle
    bench.launch_check = not args.opsrunner_no_launch_check
    bench.strategy = args.opsrunner_strategy
    bench.own_tables = args.own_process_tables
    tools = tuple(args.tools.split(","))
    all_times: Cells = {}
    try:
        for workload in args.workloads.split(","):
            for n in bench.hosts_counts:
                ticks = cpu_ticks()
                all_times[(workload, n)] = bench.run_case(workload, n, tools)
                print(workload, n, {t: [round(x, 2) for x in v] for t, v in all_times[(workload, n)][0].items()},
                      f"steal {steal_percent(ticks):.0f}%", flush=True)
        overhead = {} if args.no_overhead else {"auto": bench.per_task_overhead("auto"),
                                                "bare": bench.per_task_overhead("bare", tasks=51)}
        latency = {} if args.no_overhead else bench.call_latency()
    finally:
        bench.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    versions = subprocess.run([str(args.others_venv / "bin" / "pip"), "list", "--format=freeze"],
                              capture_output=True, text=True).stdout
    picked = [v for v in versions.splitlines() if v.split("==")[0].lower() in ("ansible-core", "pyinfra",
                                                                              "paramiko", "fabric")]
    failed = "".join(f"\nFAILED run: {f}\n" for f in bench.failures)
    hosts_were = ("each host its own sshd in its own PID namespace and /proc (--own-process-tables)"
                  if bench.own_tables else "every host an alias of one shared sshd (one process table)")
    settle = ("the module's default" if bench.launch_settle is None
              else f"{bench.launch_settle:g} s (--opsrunner-launch-settle)")
    text = (report(all_times, overhead, args.reps, latency) + failed + f"\n\nHosts: {hosts_were}.\n"
            + f"opsrunner's restart: the launch's settle {settle}; "
            + f"the play's strategy {bench.strategy or 'linear (the default)'}; "
            + ("the check that the new job can start before the kill, as the restart role's.\n"
               if bench.launch_check else "no check before the kill (--opsrunner-no-launch-check).\n")
            + f"CPU time taken by the hypervisor (steal) during the bench: {steal_percent(started):.0f}%.\n"
            + "Others: " + ", ".join(picked) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
