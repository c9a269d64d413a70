# opsrunner-agent part: the job's last good run (<pidfile base>.good.json, beside the launch
# record): the release and the exact launch (argv, env, chdir, log, umask) of the last run
# that verify passed with record_good, which rollback starts again, and the checks it passed
# (`checks`: verify's arguments less its timing), which the rollback verifies it with: a
# failed redeploy's new log_path or ready_regex says nothing of the run it goes back to.
# 0600: env may hold secrets. Written atomically (temp file + rename), never read from a
# FIFO or device.
# A release's verdict (<dest>/releases/<name>.verdict.json, beside its manifest, 0600): whether
# its code passed verify (record_good) or failed (a restart rolled back from it, a rollback's
# relaunch of it failed), so that a rollback never picks a release known to be bad by default.
# A run is its code and its settings: its launch (argv, env, chdir, log, umask) and the verify
# arguments it was judged by; the verdict keeps digests of both (`settings`). A run that fails
# with other settings than those its release last passed with does not condemn the code: the
# verdict stays "passed", the failure kept beside it (`failed_run`). A failure with the same
# settings (or unknown ones), or of a release never passed, makes it "failed".
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

    class Settings(TypedDict):
        """Digests of a run's settings besides its code: its launch, with its release's
        directory taken out (the same launch from another release is the same launch), and
        the verify arguments it was judged by; None where not known."""
        launch: str | None
        checks: str | None

    class FailedRun(TypedDict):
        """A run of a passed release that failed with other settings ("launch", "checks")."""
        at: float
        pid: int | None
        why: str | None
        differs: list[str]

    class _VerdictBase(TypedDict):
        state: str
        at: float
        pid: int | None
        why: str | None

    class Verdict(_VerdictBase, total=False):
        """A release's verdict: "passed" (verify recorded a run of it as the last good run)
        or "failed"; when, the run's pid, why it failed, and the run's settings; a passed one
        keeps the last run of it that failed with other settings."""
        settings: Settings
        failed_run: FailedRun

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
    mark_release(good["release_dir"], "passed", pid, settings=run_settings(meta, checks))
    drop_prior(pidfile)  # a run verified since: a rollback's prior run is no longer wanted
    return {"release": good["release"], "commit": good["commit"]}


VERDICT_SUFFIX = ".verdict.json"
#: A verdict's mode: its digest of the launch covers the job's environment, which may hold secrets.
VERDICT_MODE = 0o600
#: The launch record's keys that make a run's launch (with its release, what makes the run).
LAUNCH_KEYS = ("argv", "env", "chdir", "log", "umask")
#: verify's arguments that say which job and how long the request may take, not how the run was judged.
NOT_JUDGED = ("pidfile", "record_good", "budget")
#: What a release's own directory reads as in a launch's digest.
RELEASE_MARK = "{release}"


def verdict_path(release_dir: str) -> str:
    return release_dir.rstrip("/") + VERDICT_SUFFIX


def _canonical(value: object, base: str) -> object:
    """A value as its digest reads it: paths in the release `base` relative to it, numbers as
    floats (30 and 30.0 judge alike), mappings as sorted pairs (their order says nothing)."""
    if isinstance(value, str) and base:
        return RELEASE_MARK if value == base else value.replace(base + "/", RELEASE_MARK + "/")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_canonical(v, base) for v in value]
    if isinstance(value, dict):
        return sorted([str(k), _canonical(v, base)] for k, v in value.items())
    return value


def _digest(value: object) -> str:
    from .files import data_digest  # deploy_code's hashing: loaded only where a verdict is written
    return data_digest(json_dumps(value).encode(), "sha256")[:32]


def run_settings(meta: Mapping[str, object] | None, checks: Mapping[str, object] | None) -> Settings:
    """The settings of a run (its launch record, and the verify arguments it was judged by)."""
    launch = None
    if meta and meta.get("argv"):
        base = str(meta.get("release_dir") or "").rstrip("/")
        launch = _digest(_canonical(dict((k, meta.get(k)) for k in LAUNCH_KEYS), base))
    judged = None if checks is None else _digest(
        _canonical(dict((k, v) for k, v in checks.items() if k not in NOT_JUDGED), ""))
    return {"launch": launch, "checks": judged}


def _differs(passed: Settings | None, failed: Settings | None) -> list[str]:
    """Which settings of a failed run are known to differ from those of the run that passed."""
    if not passed or not failed:
        return []
    return [key for key in ("launch", "checks")
            if passed.get(key) and failed.get(key) and passed.get(key) != failed.get(key)]


def mark_release(release_dir: str | None, state: str, pid: int | None, why: str | None = None,
                 settings: Settings | None = None) -> bool:
    """Record a release's verdict: "passed", or "failed" (which a passed release whose run
    failed with other settings records as its `failed_run`, staying "passed"). False when it
    cannot be written: a verdict never fails the verify or rollback that records it."""
    if not release_dir or not os.path.isdir(release_dir):
        return False
    try:
        before = release_verdict(release_dir)
    except Unreadable:  # replaced: an unreadable verdict is never taken for a pass
        before = None
    verdict: Verdict = {"state": state, "at": time.time(), "pid": pid, "why": why}
    if settings is not None:
        verdict["settings"] = settings
    if before is not None and before["state"] == "passed":
        differs = _differs(before.get("settings"), settings) if state == "failed" else []
        if differs:  # the code passed; this run's launch or checks failed
            verdict = before
            verdict["failed_run"] = {"at": time.time(), "pid": pid, "why": why, "differs": differs}
        elif state == "passed" and "failed_run" in before:
            verdict["failed_run"] = before["failed_run"]
    try:
        write_atomic(verdict_path(release_dir), json_dumps(verdict).encode(), VERDICT_MODE)
    except OSError:
        return False
    return True


def _settings(raw: object) -> Settings | None:
    if not isinstance(raw, dict):
        return None
    launch, checks = raw.get("launch"), raw.get("checks")
    return {"launch": launch if isinstance(launch, str) else None,
            "checks": checks if isinstance(checks, str) else None}


def _failed_run(raw: object) -> FailedRun | None:
    if not isinstance(raw, dict):
        return None
    at, pid, why, differs = raw.get("at"), raw.get("pid"), raw.get("why"), raw.get("differs")
    return {"at": float(at) if isinstance(at, (int, float)) else 0.0, "pid": pid if isinstance(pid, int) else None,
            "why": why if isinstance(why, str) else None,
            "differs": [str(d) for d in differs] if isinstance(differs, list) else []}


def release_verdict(release_dir: str) -> Verdict | None:
    """A release's last verdict, or None when no run of it was ever judged; Unreadable when
    its verdict file is there but cannot be used (never taken for a release never judged)."""
    raw = load_json(verdict_path(release_dir), "release verdict")
    if raw is None or raw.get("state") not in ("passed", "failed"):
        return None
    at, pid, why = raw.get("at"), raw.get("pid"), raw.get("why")
    verdict: Verdict = {"state": str(raw["state"]), "at": float(at) if isinstance(at, (int, float)) else 0.0,
                        "pid": pid if isinstance(pid, int) else None, "why": why if isinstance(why, str) else None}
    settings, failed = _settings(raw.get("settings")), _failed_run(raw.get("failed_run"))
    if settings is not None:
        verdict["settings"] = settings
    if failed is not None:
        verdict["failed_run"] = failed
    return verdict


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
