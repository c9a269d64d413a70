# opsrunner-agent part: the job's last good run (<pidfile base>.good.json, beside the launch
# record): the release and the exact launch (argv, env, chdir, log, umask) of the last run
# that verify passed with record_good, which rollback starts again, and the checks it passed
# (`checks`: verify's arguments less its timing), which the rollback verifies it with: a
# failed redeploy's new log_path or ready_regex says nothing of the run it goes back to.
# 0600: env may hold secrets. Written atomically (temp file + rename), never read from a
# FIFO or device.
# A release's verdict (<dest>/releases/<name>.verdict.json, beside its manifest): the last
# time a run of it passed verify (record_good) or failed (a restart rolled back from it, a
# rollback's relaunch of it failed), so that a rollback never picks a release known to be
# bad by default.
# A hand rollback's prior run (<pidfile base>.rollback-prior.json, 0600): the launch that ran
# before it, started again when the rollback's own target fails.
from __future__ import annotations

import os
import time

from .atomic import write_atomic
from .jobfiles import boot_id, load_launch_record, pidfile_paths, read_pidfile
from .procs import alive
from .reads import Unreadable, load_json
from .watchdog import ignored
from .wire import json_dumps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, TypedDict

    from .protocol_jobs import GoodRun, GoodRunRef, LaunchRecord, VerifyArgs

    class Verdict(TypedDict):
        """A release's last verdict: "passed" (verify recorded a run of it as the last good
        run) or "failed"; when, the run's pid, and why it failed."""
        state: str
        at: float
        pid: int | None
        why: str | None

GOOD_MODE = 0o600
PRIOR_SUFFIX = ".rollback-prior.json"
#: verify's arguments kept with a good run: what it was checked for, not how long (within,
#: stable_for, log_grows, fail_grace) nor which job (pidfile), which the rollback gives.
CHECKS: dict[str, type | tuple[type, ...]] = {
    "pattern": str, "user": (str, int), "processes": int, "min_processes": int, "log": str, "log_exists": bool,
    "log_min_bytes": int, "log_regex": str, "log_not_regex": str, "port": int, "gpu_min_memory_mb": (int, float),
    "gpus": list}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def as_good_run(raw: Mapping[str, object]) -> GoodRun:
    """A last good run read from its file, each key with the type its writer gives it."""
    argv, env = raw.get("argv"), raw.get("env")
    good: GoodRun = {
        "release": _text(raw.get("release")), "release_dir": _text(raw.get("release_dir")),
        "commit": _text(raw.get("commit")), "link": _text(raw.get("link")),
        "argv": [str(a) for a in argv] if isinstance(argv, list) else [],
        "env": dict((str(k), str(v)) for k, v in env.items()) if isinstance(env, dict) else {},
        "chdir": _text(raw.get("chdir")), "log": _text(raw.get("log")), "umask": _text(raw.get("umask")),
    }
    pid, start, launched = raw.get("pid"), raw.get("start"), raw.get("launched_at")
    good["pid"] = pid if isinstance(pid, int) else None
    good["start"] = start if isinstance(start, int) else None
    good["launched_at"] = float(launched) if isinstance(launched, (int, float)) else None
    verified = raw.get("verified_at")
    good["verified_at"] = float(verified) if isinstance(verified, (int, float)) else 0.0
    good["boot_id"] = _text(raw.get("boot_id"))
    checks = as_checks(raw.get("checks"))
    if checks is not None:  # absent in a record from before checks were kept
        good["checks"] = checks
    return good


def as_checks(raw: object) -> VerifyArgs | None:
    """The checks a good run passed, as recorded (CHECKS' keys, each of its type; a bool is
    no number), or None where none were recorded or they are not an object."""
    if not isinstance(raw, dict):
        return None
    checks: dict[str, object] = {}
    for key, kind in CHECKS.items():
        value = raw.get(key)
        if key == "gpus" and isinstance(value, list):  # indexes (a bool is no index)
            checks[key] = [int(v) for v in value if isinstance(v, int) and not isinstance(v, bool)]
        elif isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            checks[key] = value
    return checks  # type: ignore[return-value]  # each key of VerifyArgs with its type


def read_good(pidfile: str) -> GoodRun | None:
    """The job's last good run, or None when none is recorded; Unreadable when its file is
    there but cannot be used (corrupt): never taken for a job that has none."""
    raw = load_json(pidfile_paths(pidfile)["good"], "last good run")
    return None if raw is None or not raw.get("argv") else as_good_run(raw)


def link_of(release_dir: str | None) -> str | None:
    """The `current` link of a release's tree (<dest>/releases/<name> -> <dest>/current)."""
    return os.path.join(os.path.dirname(os.path.dirname(release_dir)), "current") if release_dir else None


def record_good(pidfile: str, checks: VerifyArgs | None = None) -> GoodRunRef | None:
    """Record the pidfile's live, launched job as the last good run, with the checks it
    passed (`checks`, verify's arguments: CHECKS' are kept); None when the pidfile
    names no live job with a launch record (nothing is written then). Unreadable when the
    launch record is there but cannot be used: the run it launched cannot be recorded, and
    the verify asked to record it fails, saying so (a later rollback would otherwise start an
    older run than the one just verified, and no message would have said why)."""
    try:
        meta = load_launch_record(pidfile)
    except Unreadable as exc:
        raise Unreadable(f"every check passed, but the run cannot be recorded as the last good run: its launch "
                         f"record {exc.path} is unreadable ({exc.why}); the last good run recorded before stays "
                         "the one a rollback starts", exc.path, exc.why) from None
    pid, start = read_pidfile(pidfile)
    if not pid or start is None or not meta or meta.get("pid") != pid or not alive(pid, start):
        return None
    good: GoodRun = {
        "release": meta.get("release"), "release_dir": meta.get("release_dir"), "commit": meta.get("commit"),
        "link": link_of(meta.get("release_dir")),
        "argv": list(meta.get("argv") or []), "env": dict(meta.get("env") or {}), "chdir": meta.get("chdir"),
        "log": meta.get("log"), "umask": meta.get("umask"), "pid": pid, "start": start,
        "launched_at": meta.get("started_at"), "verified_at": time.time(), "boot_id": boot_id(),
    }
    kept = as_checks(checks)
    if kept is not None:
        good["checks"] = kept
    write_atomic(pidfile_paths(pidfile)["good"], json_dumps(good).encode(), GOOD_MODE)
    mark_release(good["release_dir"], "passed", pid)
    drop_prior(pidfile)  # a run verified since: a rollback's prior run is no longer wanted
    return {"release": good["release"], "commit": good["commit"]}


VERDICT_SUFFIX = ".verdict.json"


def verdict_path(release_dir: str) -> str:
    return release_dir.rstrip("/") + VERDICT_SUFFIX


def mark_release(release_dir: str | None, state: str, pid: int | None, why: str | None = None) -> bool:
    """Record a release's verdict (replacing the one before): "passed" or "failed". False when
    it cannot be written: a verdict never fails the verify or rollback that records it."""
    if not release_dir or not os.path.isdir(release_dir):
        return False
    verdict: Verdict = {"state": state, "at": time.time(), "pid": pid, "why": why}
    try:
        write_atomic(verdict_path(release_dir), json_dumps(verdict).encode())
    except OSError:
        return False
    return True


def release_verdict(release_dir: str) -> Verdict | None:
    """A release's last verdict, or None when no run of it was ever judged; Unreadable when
    its verdict file is there but cannot be used (never taken for a release never judged)."""
    raw = load_json(verdict_path(release_dir), "release verdict")
    if raw is None or raw.get("state") not in ("passed", "failed"):
        return None
    at, pid, why = raw.get("at"), raw.get("pid"), raw.get("why")
    return {"state": str(raw["state"]), "at": float(at) if isinstance(at, (int, float)) else 0.0,
            "pid": pid if isinstance(pid, int) else None, "why": why if isinstance(why, str) else None}


def verdict_text(verdict: Verdict) -> str:
    """`failed at 2026-12-04 21:37:10 (pid N): WHY` / `passed verify at ...`."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(verdict["at"]))
    pid = f" (pid {verdict['pid']})" if verdict["pid"] else ""
    if verdict["state"] == "passed":
        return f"passed verify at {when}{pid}"
    return f"failed at {when}{pid}" + (f": {verdict['why']}" if verdict["why"] else "")


def prior_path(pidfile: str) -> str:
    base = pidfile[:-4] if pidfile.endswith(".pid") else pidfile
    return base + PRIOR_SUFFIX


def save_prior(pidfile: str, meta: LaunchRecord, checks: VerifyArgs | None = None) -> str | None:
    """Keep the launch of the run a hand rollback is about to stop (as a good run's record),
    with the checks it passed where it is the last good run (`checks`); why it cannot be
    written, or None."""
    prior: dict[str, object] = {
        "release": meta.get("release"), "release_dir": meta.get("release_dir"), "commit": meta.get("commit"),
        "link": link_of(meta.get("release_dir")), "argv": list(meta.get("argv") or []),
        "env": dict(meta.get("env") or {}), "chdir": meta.get("chdir"), "log": meta.get("log"),
        "umask": meta.get("umask"), "pid": meta.get("pid"), "start": meta.get("start"),
        "launched_at": meta.get("started_at")}
    if checks is not None:
        prior["checks"] = checks
    try:
        write_atomic(prior_path(pidfile), json_dumps(prior).encode(), GOOD_MODE)
    except OSError as exc:
        return f"{exc.filename or prior_path(pidfile)}: {exc.strerror} (errno {exc.errno})"
    return None


def take_prior(pidfile: str) -> GoodRun | None:
    """The prior run a hand rollback kept (the file is removed), or None when none was kept.
    Unreadable when the file is there but cannot be used (corrupt, too large, a FIFO): never
    taken for "nothing ran before"; it is left in place, for the launch it holds to be read
    by hand (the next hand rollback replaces it, the next recorded good run removes it)."""
    raw = load_json(prior_path(pidfile), "rollback's saved launch")
    drop_prior(pidfile)
    return None if raw is None or not raw.get("argv") else as_good_run(raw)


def drop_prior(pidfile: str) -> None:
    with ignored(OSError):  # absent; or not a file: take_prior never reads it then
        os.unlink(prior_path(pidfile))
