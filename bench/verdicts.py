"""Verdict stress benchmark: does `verify` (and the launch) say the right thing when every core is busy?

Each run is a real `opsrunner play playbooks/restart_training.yml` of the demo trainer, in its
own directory (its own code, pidfile, log, checkpoint and cache), with `--json-events`: the
verdict (the play's exit code and which task failed) and the diagnosis (verify's
`data.diagnosis`, or the failed launch's message) are read from the JSON events.

Scenarios and what the product must say:

  healthy        the trainer as is              rc 0, verify ok
  crash          --crash-after=3                rc 2, verify failed: "exited with code 1"
                                                (or the launch: "exited at once with code 1")
  hang           --hang-after=2                 rc 2, verify failed: "hung: ... has not grown"
  exit0          --exit-after=3                 rc 2, verify failed: "exited with code 0"
  never_started  train_command names no file    rc 2, launch failed: "program ... not found on the target"
  exec_fails     a script whose #! interpreter  rc 2, launch failed: "could not start the job: exec ..."
                 does not exist

Transports: `local` (connection local) and `ssh` (a private sshd on 127.0.0.1, started here
with its own keys, through the hostile wrapper chain tests/wrappers/session_reaper.py then
fd_holder.py). Meanwhile os.cpu_count() busy-loop processes keep every core busy (started
here with a unique marker on their command line, killed by pid at the end).

    .venv/bin/python bench/verdicts.py                       # 100 local + 20 ssh runs per scenario
    .venv/bin/python bench/verdicts.py --local 5 --ssh 2     # a quick shake-out
    .venv/bin/python bench/verdicts.py --scenarios crash,hang --local 30 --ssh 0

Exit status: 0 when every run got the right verdict and diagnosis, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sshd import PrivateSSHD, start_sshd  # noqa: E402

WRAPPERS = ROOT / "tests" / "wrappers"
SCENARIOS = ("healthy", "crash", "hang", "exit0", "never_started", "exec_fails")
TRANSPORTS = ("local", "ssh")


@dataclass(frozen=True)
class Expect:
    ok: bool  # the play succeeds (rc 0) or fails (rc 2)
    failed_module: str | None  # the module whose task fails ("verify" or "launch_detached")
    diagnosis: re.Pattern[str] | None  # what the failing task's diagnosis must say
    extra_args: str = ""
    also_launch: re.Pattern[str] | None = None  # a failed launch that is right too (the job ended at once)


EXPECT: dict[str, Expect] = {
    "healthy": Expect(True, None, None),
    "crash": Expect(False, "verify", re.compile(r"^the job \(pid \d+\) exited with code 1\b"), "--crash-after=3",
                    re.compile(r"^launched pid \d+; it exited at once with code 1\b")),
    "hang": Expect(False, "verify", re.compile(r"^hung: the job \(pid \d+\) is running but its log .* has not "
                                              r"grown (for|since)"), "--hang-after=2"),
    "exit0": Expect(False, "verify", re.compile(r"^the job \(pid \d+\) exited with code 0\b"), "--exit-after=3"),
    "never_started": Expect(False, "launch_detached", re.compile(r"^program \S+ not found on the target")),
    "exec_fails": Expect(False, "launch_detached", re.compile(r"^could not start the job: exec \S+: ")),
}


@dataclass
class Outcome:
    scenario: str
    transport: str
    index: int
    seconds: float
    rc: int | None
    verdict_ok: bool
    diagnosis_ok: bool
    said: str  # the failing task's diagnosis (or "ok: ..."), as the product said it
    detail: str = ""  # the whole message of a wrong run
    leftovers: int = 0  # processes naming the run's directory after a play whose job must be gone


@dataclass
class Cell:
    outcomes: list[Outcome] = field(default_factory=list)


def unique_pids(token: str) -> list[int]:
    """Pids (not zombies, not this process) whose command line contains `token`."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if token in cmdline:
            found.append(int(name))
    return found


def kill_marked(token: str) -> None:
    """SIGKILL every process this bench started whose command line names `token` (a directory
    whose name is unique to this bench run)."""
    for _ in range(3):
        pids = unique_pids(token)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


class Burners:
    """os.cpu_count() busy loops, for the whole bench; their command lines carry a unique marker."""

    def __init__(self, count: int) -> None:
        self.marker = f"opsrunner-verdicts-burner-{uuid.uuid4().hex[:12]}"
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass", self.marker],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL) for _ in range(count)]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait()


class LoadSampler(threading.Thread):
    """The 1-minute load average every 5 s while the runs go."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(5):
            self.samples.append(os.getloadavg()[0])


class VerdictBench:
    def __init__(self, work: Path, args: argparse.Namespace, source: Path) -> None:
        self.work = work
        self.args = args
        self.source = source  # the opsrunner tree that runs: this checkout, or an export of --commit
        self.sshd: PrivateSSHD | None = None
        self.lock = threading.Lock()
        self.cells: dict[tuple[str, str], Cell] = {}
        self.done = 0
        self.total = 0
        # A script that exists and is executable but whose interpreter does not: exec fails (ENOENT).
        self.bad_script = work / "bad-interpreter.sh"
        self.bad_script.write_text("#!/nonexistent/opsrunner-bench/interp\necho never\n")
        self.bad_script.chmod(0o755)

    def start_sshd(self) -> None:
        home = self.work / "home"
        home.mkdir()
        # A clean HOME in the ssh sessions (as bench.py): a ~/.bashrc running `pyenv init` would
        # add ~170 ms to every command; opsrunner caches its helper under this HOME too.
        self.sshd = start_sshd(self.work / "sshd", ("MaxStartups 500:30:1000", "MaxSessions 500",
                                                    f"SetEnv HOME={home}"))

    def host_vars(self, transport: str) -> dict[str, Any]:
        if transport == "local":
            return {"connection": "local"}
        assert self.sshd is not None
        chain = [f"{sys.executable} {WRAPPERS / 'session_reaper.py'} --",
                 f"{sys.executable} {WRAPPERS / 'fd_holder.py'} --"]
        return self.sshd.host_vars(wrapper=chain)

    def prepare(self, scenario: str, transport: str, index: int) -> tuple[Path, list[str]]:
        run = self.work / "runs" / f"{scenario}-{transport}-{index:03d}"
        run.mkdir(parents=True)
        if scenario == "never_started":
            command = f"{run}/code/no-such-trainer.py --checkpoint {run}/ck.json"
        elif scenario == "exec_fails":
            command = str(self.bad_script)
        else:
            command = f"{sys.executable} -u {run}/code/train.py --checkpoint {run}/ck.json --cache-dir {run}/cache"
        inventory = {"all": {"children": {"trainers": {
            "hosts": {f"{transport}-box": self.host_vars(transport)},
            "vars": {
                "code_src": str(self.source / "examples" / "demo_trainer"), "code_dest": f"{run}/code",
                "cache_paths": [f"{run}/cache"],
                "pidfile": f"{run}/train.pid", "log_path": f"{run}/train.log", "train_command": command,
                "train_chdir": str(run), "ready_regex": "ready: training", "kill_grace": 5, "wait_gpu_free": 0,
                "deploy_timeout": 60, "stop_timeout": 60, "cache_timeout": 60, "start_timeout": 60,
            }}}}}
        (run / "inv.yml").write_text(json.dumps(inventory, indent=1))
        a = self.args
        extra = {"verify_within": a.verify_within, "verify_stable_for": a.stable_for,
                 "log_grows_within": a.log_grows_within, "train_extra_args": EXPECT[scenario].extra_args}
        argv = [sys.executable, "-m", "opsrunner", "play", str(self.source / "playbooks" / "restart_training.yml"),
                "-i", str(run / "inv.yml"), "--json-events", str(run / "events.jsonl"), "--no-history", "--no-color",
                "-e", json.dumps(extra)]
        return run, argv

    def one(self, scenario: str, transport: str, index: int) -> Outcome:
        run, argv = self.prepare(scenario, transport, index)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.source) + os.pathsep + env.get("PYTHONPATH", "")
        started = time.monotonic()
        rc: int | None
        with (run / "console.txt").open("w") as console:
            proc = subprocess.Popen(argv, cwd=run, env=env, stdin=subprocess.DEVNULL, stdout=console,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(self.args.run_timeout)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)  # opsrunner stops its remote trees and prints the recap
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                rc = None
        seconds = time.monotonic() - started
        # A healthy or hung job runs on after its play; in the other scenarios nothing naming the
        # run's directory may be left. Then all of it is killed.
        left = 0 if scenario in ("healthy", "hang") else len(unique_pids(f"{run}/"))
        kill_marked(f"{run}/")
        outcome = judge(scenario, transport, index, seconds, rc, run)
        outcome.leftovers = left
        if outcome.verdict_ok and outcome.diagnosis_ok and not self.args.keep:
            shutil.rmtree(run, ignore_errors=True)
        with self.lock:
            self.cells.setdefault((scenario, transport), Cell()).outcomes.append(outcome)
            self.done += 1
            mark = "" if outcome.verdict_ok and outcome.diagnosis_ok else "  WRONG: " + outcome.said[:160]
            if mark or self.done % 20 == 0 or self.done == self.total:
                print(f"[{self.done}/{self.total}] {scenario}/{transport}#{index} rc={rc} "
                      f"{seconds:.1f}s load {os.getloadavg()[0]:.1f}{mark}", flush=True)
        return outcome

    def plan(self) -> list[tuple[str, str, int]]:
        """Round-robin over scenarios and transports, so each meets the same load over the bench."""
        counts = {"local": self.args.local, "ssh": self.args.ssh}
        order = []
        for i in range(max(counts.values())):
            for scenario in self.args.scenarios:
                for transport in TRANSPORTS:
                    if i < counts[transport]:
                        order.append((scenario, transport, i))
        return order

    def run_all(self) -> None:
        order = self.plan()
        self.total = len(order)
        with ThreadPoolExecutor(self.args.jobs) as pool:
            for future in [pool.submit(self.one, *item) for item in order]:
                future.result()


def events_of(run: Path) -> list[dict[str, Any]]:
    path = run / "events.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def first_line(text: str) -> str:
    return (text or "").splitlines()[0] if text else ""


def judge(scenario: str, transport: str, index: int, seconds: float, rc: int | None, run: Path) -> Outcome:
    exp = EXPECT[scenario]
    ends = [e for e in events_of(run) if e.get("event") == "task_end"]
    failed = [e for e in ends if e.get("status") in ("failed", "timed_out", "unreachable")]
    verify = next((e for e in ends if e.get("module") == "verify"), None)

    def out(verdict_ok: bool, diagnosis_ok: bool, said: str) -> Outcome:
        detail = ""
        if not (verdict_ok and diagnosis_ok):
            whole = failed[0]["msg"] if failed else (verify or {}).get("msg", "")
            console = (run / "console.txt").read_text(errors="replace") if (run / "console.txt").exists() else ""
            detail = whole or console[-2000:]
        return Outcome(scenario, transport, index, seconds, rc, verdict_ok, diagnosis_ok, said, detail)

    if rc is None:
        return out(False, False, f"bench timeout: the play ran longer than its {seconds:.0f}s")
    if exp.ok:
        if rc == 0 and verify is not None and verify.get("status") == "ok":
            state = (verify.get("data") or {}).get("state")
            return out(True, state == "running", f"ok: state {state}")
        said = (f"{failed[0]['module']} {failed[0]['status']}: "
                f"{(failed[0].get('data') or {}).get('diagnosis') or first_line(failed[0]['msg'])}"
                if failed else f"rc {rc}, no failed task")
        return out(False, False, said)
    if rc != 2 or not failed:
        said = f"rc {rc}: " + (f"verify {verify['status']}: {first_line(verify['msg'])}" if verify else "no verify")
        return out(False, False, said)
    task = failed[0]
    diagnosis = (task.get("data") or {}).get("diagnosis") if task["module"] == "verify" else first_line(task["msg"])
    diagnosis = diagnosis or first_line(task["msg"])
    said = f"{task['module']} {task['status']}: {diagnosis}"
    if task["module"] == exp.failed_module and task["status"] == "failed":
        return out(True, bool(exp.diagnosis and exp.diagnosis.search(diagnosis)), said)
    if task["module"] == "launch_detached" and exp.also_launch is not None and task["status"] == "failed":
        return out(True, bool(exp.also_launch.search(diagnosis)), said)
    return out(False, False, said)


def shape(text: str) -> str:
    """A diagnosis with its pids, paths, sizes, times and durations blanked (exit codes and
    signals kept), to count the kinds of answer."""
    text = re.sub(r"/[^\s:;,]+", "PATH", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?", "TIME", text)
    text = re.sub(r"\b(pid|errno|running:) \d+", r"\1 N", text)
    text = re.sub(r"\b\d+(\.\d+)?(s\b| bytes)", r"N\2", text)
    return text[:160]


def report(bench: VerdictBench, args: argparse.Namespace, load: LoadSampler, started: float,
           load_before: tuple[float, float, float], code: str) -> tuple[str, int]:
    lines = ["| scenario | transport | runs | wrong verdicts | wrong diagnoses | processes left | median s | max s |",
             "|---|---|---|---|---|---|---|---|"]
    wrong_total = 0
    examples: list[str] = []
    said_lines: list[str] = []
    for scenario in args.scenarios:
        for transport in TRANSPORTS:
            cell = bench.cells.get((scenario, transport))
            if not cell:
                continue
            outs = sorted(cell.outcomes, key=lambda o: o.index)
            bad_verdict = [o for o in outs if not o.verdict_ok]
            bad_diag = [o for o in outs if o.verdict_ok and not o.diagnosis_ok]
            leftovers = sum(o.leftovers for o in outs)
            wrong_total += len(bad_verdict) + len(bad_diag) + leftovers
            times = [o.seconds for o in outs]
            lines.append(f"| {scenario} | {transport} | {len(outs)} | {len(bad_verdict)} | {len(bad_diag)} | "
                         f"{leftovers} | {statistics.median(times):.1f} | {max(times):.1f} |")
            for o in (bad_verdict + bad_diag)[:args.examples]:
                kind = "wrong verdict" if not o.verdict_ok else "wrong diagnosis"
                examples.append(f"- {scenario}/{transport} #{o.index} ({kind}, rc {o.rc}, {o.seconds:.1f}s): "
                                f"{o.said}\n" + "\n".join("      " + ln for ln in o.detail.splitlines()[:12]))
            kinds = Counter(shape(o.said) for o in outs)
            said_lines.append(f"- {scenario}/{transport}: " + "; ".join(f"{n} x `{k}`" for k, n in kinds.most_common()))
    samples = load.samples or [os.getloadavg()[0]]
    text = "\n".join(lines)
    text += (f"\n\nWrong in all: {wrong_total} of {sum(len(c.outcomes) for c in bench.cells.values())} runs.\n")
    if examples:
        text += f"\nFirst {args.examples} wrong runs per cell (what the product said; the failing task's message):\n"
        text += "\n".join(examples) + "\n"
    text += "\nWhat the product said, by kind (numbers and paths blanked):\n" + "\n".join(said_lines) + "\n"
    text += (f"\nCode: {code}; "
             f"{os.cpu_count()} cores, {args.burners} busy-loop burners; {args.jobs} plays at a time; "
             f"verify_within={args.verify_within} verify_stable_for={args.stable_for} "
             f"log_grows_within={args.log_grows_within}; took {time.monotonic() - started:.0f}s.\n"
             f"Load average (1 min) before: {load_before[0]:.2f}; during (every 5 s): mean "
             f"{statistics.mean(samples):.1f}, max {max(samples):.1f}.\n")
    return text, wrong_total


def git(*a: str) -> str:
    return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def source_tree(work: Path, commit: str | None) -> tuple[Path, str]:
    """(the opsrunner tree to run, how to name it): this checkout as it is (other people's
    uncommitted edits included), or with --commit a clean export of that commit."""
    if commit is None:
        dirty = git("status", "--porcelain", "--", "opsrunner", "playbooks", "roles", "examples")
        return ROOT, f"the working tree at {git('rev-parse', '--short', 'HEAD')}" + (
            " with uncommitted changes under opsrunner/, playbooks/, roles/ or examples/" if dirty else "")
    sha = git("rev-parse", "--short", commit + "^{commit}")
    dest = work / "src"
    dest.mkdir()
    archive = subprocess.run(["git", "archive", sha, "opsrunner", "playbooks", "roles", "examples", "inventory"],
                             cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest, f"commit {sha} (a clean export of it)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--local", type=int, default=100, help="runs per scenario on the local connection")
    parser.add_argument("--ssh", type=int, default=20, help="runs per scenario over ssh through the wrappers")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated, of: " + ", ".join(SCENARIOS))
    parser.add_argument("--jobs", type=int, default=4, help="plays at a time (each in its own directory)")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1,
                        help="busy-loop processes for the whole bench (default: one per core)")
    parser.add_argument("--verify-within", type=float, default=20)
    parser.add_argument("--stable-for", type=float, default=3)
    parser.add_argument("--log-grows-within", type=float, default=2)
    parser.add_argument("--run-timeout", type=float, default=120, help="seconds before a play is stopped")
    parser.add_argument("--examples", type=int, default=3, help="wrong runs shown per cell")
    parser.add_argument("--commit", help="run a clean export of this commit (e.g. HEAD) instead of the "
                        "working tree as it is")
    parser.add_argument("--keep", action="store_true", help="keep every run's directory (wrong ones are kept)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "verdicts-latest.md")
    args = parser.parse_args()
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in args.scenarios if s not in EXPECT]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    if args.stable_for < args.log_grows_within:
        parser.error("--stable-for must be >= --log-grows-within (else a job that hangs at once passes)")

    work = Path(tempfile.mkdtemp(prefix="opsrunner-verdicts-"))
    source, code = source_tree(work, args.commit)
    load_before = os.getloadavg()
    bench = VerdictBench(work, args, source)
    burners = None
    sampler = LoadSampler()
    started = time.monotonic()
    try:
        if args.ssh:
            bench.start_sshd()
        burners = Burners(args.burners)
        sampler.start()
        bench.run_all()
    finally:
        sampler.stop_event.set()
        if burners:
            burners.stop()
        kill_marked(f"{work}/runs/")
        if bench.sshd:
            bench.sshd.stop()
    text, wrong = report(bench, args, sampler, started, load_before, code)
    command = "python bench/verdicts.py " + " ".join(sys.argv[1:])
    text = f"`{command.strip()}`\n\n" + text
    kept = sorted(p.name for p in (work / "runs").iterdir()) if (work / "runs").exists() else []
    if kept:
        text += f"Directories of the wrong runs are kept under {work}/runs.\n"
    else:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n" + text)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
