# opsrunner-agent part: rollback. Puts the job's last good run (goodrun.py) back in steps, each
# a request of its own, as a restart does: "start" stops what runs from the pidfile now,
# switches <dest>/current back to the release (removes it where the run gone back to is a
# plain deploy's: no release runs then) and starts the recorded launch again (the same
# argv, env, chdir, log and umask), then returns; the controller verifies the run (op_verify
# with record_good) in another request. So the relaunched job is never in the tree of a
# request that is still running, which server.py kills when the controller goes away.
# When the relaunch fails, "undo" records its release as failed (goodrun.py: not where it passed
# with other settings than the relaunch's) and, after a hand rollback,
# starts the run that was running before it again (kept by "start"), for the controller to
# verify. All of it happens here, on the target, so the job's environment (which may hold
# secrets) never travels to the controller: the replies name releases, commits and pids only.
from __future__ import annotations

import os

from .goodrun import (
    drop_prior,
    link_of,
    mark_release,
    read_good,
    release_verdict,
    run_settings,
    save_prior,
    take_prior,
    verdict_text,
)
from .guards import Refused
from .jobfiles import launch_record, load_launch_record, pidfile_paths, read_pidfile, when
from .launch import op_launch
from .procs import alive, op_kill
from .reads import Unreadable
from .releases import changed_in_place, current_release, list_releases, release_dir_of, releases_dir, switch_link
from .unlink import job_tree, remove_link, used_by_others

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, Optional

    from .goodrun import Verdict
    from .protocol_jobs import GoodRun, KillArgs, LaunchArgs, RollbackArgs, RollbackReply, VerifyArgs

    #: {release name: its verdict, None where no run of it was judged}
    Verdicts = Dict[str, Optional[Verdict]]


class Target:
    """Where a rollback goes: the release (None without releases) and the launch to start."""
    __slots__ = ("argv", "chdir", "commit", "env", "known_failed", "release", "release_dir")

    def __init__(self, release: str | None, release_dir: str | None, commit: str | None, argv: list[str],
                 chdir: str | None, env: dict[str, str]) -> None:
        self.release, self.release_dir, self.commit = release, release_dir, commit
        self.argv, self.chdir, self.env = argv, chdir, env
        try:
            verdict = release_verdict(release_dir) if release_dir else None
        except Unreadable:  # named (verdicts_of keeps it from being "previous"): gone to, as one never judged
            verdict = None
        self.known_failed = verdict_text(verdict) if verdict and verdict["state"] == "failed" else None


#: Characters of a failure's reason kept per release in a refusal's list of releases.
WHY_CHARS = 120


def _moved(value: str | None, old: str | None, new: str | None) -> str | None:
    """A path or argument of the good run, moved from its release's directory to another's."""
    if value is None or not old or not new or old == new:
        return value
    if value == old:
        return new
    return value.replace(old + "/", new + "/")


def choose_previous(names: list[str], current: str | None, verdicts: Verdicts | None = None) -> str:
    """The release before `current` (names oldest first); with verdicts, the newest one
    before it that last passed verify (never one that failed or was never verified).
    ValueError, saying why, when there is none."""
    if current is None:
        raise ValueError("there is no current release to go back from")
    if current not in names:
        raise ValueError(f"the current release {current} is not among the releases")
    before = names[:names.index(current)]
    if not before:
        raise ValueError(f"there is no release before {current}")
    if verdicts is None:
        return before[-1]
    return _newest_passed(before, verdicts, f"before the current one ({current}) passed verify")


def previous_without_current(names: list[str], verdicts: Verdicts) -> str:
    """'previous' where <dest>/current is absent (a plain deploy, or a rollback to a plain
    deploy's run, removed it: what was deployed last is no release, so every release is before
    it): the newest release that last passed verify. ValueError, saying why, when none did."""
    if not names:
        raise ValueError("there is no release to go back to")
    return _newest_passed(names, verdicts, "passed verify (current is absent: the code deployed last is no release)")


def _newest_passed(before: list[str], verdicts: Verdicts, where: str) -> str:
    for name in reversed(before):
        verdict = verdicts.get(name)
        if verdict is not None and verdict["state"] == "passed":
            return name
    raise _refusal(where, [f"{name}{':' if _unreadable(verdicts.get(name)) else ''} {_short(verdicts.get(name))}"
                           for name in reversed(before)])


def _unreadable(verdict: Verdict | None) -> bool:
    return verdict is not None and verdict["state"] == UNREADABLE


def _short(verdict: Verdict | None) -> str:
    if verdict is None:
        return "was never verified"
    if verdict["state"] == UNREADABLE:
        return str(verdict["why"])
    text = verdict_text(verdict)
    return text if len(text) <= WHY_CHARS else text[:WHY_CHARS] + "..."


def _refusal(where: str, seen: list[str]) -> ValueError:
    listed = "; ".join(seen[:5]) + (f"; and {len(seen) - 5} older" if len(seen) > 5 else "")
    return ValueError(f"no release {where}, so there is none to go back "
                     f"to ({listed}); nothing was stopped. Name the release to go to (release=NAME) to start "
                     "one anyway")


#: A verdict's state where its file is there but cannot be used: never "passed".
UNREADABLE = "unreadable"


def verdict_of(release_dir: str) -> Verdict | None:
    """release_verdict, with a verdict file that cannot be used as an UNREADABLE verdict whose
    `why` says so ("its verdict file F is unreadable: not valid JSON (...)")."""
    try:
        return release_verdict(release_dir)
    except Unreadable as exc:
        return {"state": UNREADABLE, "at": 0.0, "pid": None,
                "why": f"its verdict file {exc.path} is unreadable: {exc.why}"}


def verdicts_of(dest: str, good: GoodRun) -> Verdicts:
    """Each release's last verdict; the last good run's release passed where none is recorded
    (a release verified before verdicts were kept), not where its verdict cannot be read."""
    folder = releases_dir(dest)
    found: Verdicts = dict((r["name"], verdict_of(os.path.join(folder, r["name"]))) for r in list_releases(dest))
    name = good.get("release")
    if name in found and found[name] is None:
        found[str(name)] = {"state": "passed", "at": good.get("verified_at") or 0.0, "pid": good.get("pid"),
                            "why": None}
    return found


def check_intact(release: str | None, release_dir: str | None) -> None:
    """ValueError when a file of the release was changed in place since its deploy (the
    code would not be the code that ran well): nothing may be stopped for it."""
    if not release_dir:
        return
    changed = changed_in_place(release_dir)
    if changed:
        raise ValueError(f"refusing to roll back to release {release}: {changed} (its files are hard links "
                         "shared with other releases; deploy a fix instead of editing one in place)")


def _not_from_a_release(good: GoodRun, wanted: str) -> str:
    """Why a release cannot be gone to when the last good run was a plain deploy's."""
    what = "the previous release" if wanted == "previous" else f"release {wanted!r}"
    launch = " ".join(good.get("argv") or [])[:150] + (f" in {good['chdir']}" if good.get("chdir") else "")
    return (f"cannot roll back to {what}: the last good run (pid {good.get('pid')}, verified at "
            f"{when(good.get('verified_at'))}) was launched from a plain deploy, not from a release ({launch}), "
            "so there is no release launch to start it with: a rollback to a release starts the last good run's "
            "launch with its paths moved to that release, and needs a last good run launched through "
            "<dest>/current (deploy_code releases: true). Restart with releases first, or roll back without "
            "a release (the last good run as it was)")


def target_of(good: GoodRun, wanted: str | None) -> Target:
    """The release to roll back to (the good run's, "previous", or a name) and its launch;
    ValueError when there is none to go to or it is changed in place."""
    argv, chdir, env = list(good.get("argv") or []), good.get("chdir"), dict(good.get("env") or {})
    link, good_dir = good.get("link"), good.get("release_dir")
    if not wanted:
        if good.get("release") and good_dir and not os.path.isdir(good_dir):
            raise ValueError(f"the last good run's release {good.get('release')} is gone ({good_dir} is missing)")
        check_intact(good.get("release"), good_dir)
        return Target(good.get("release"), good_dir, good.get("commit"), argv, chdir, env)
    if not link or not good_dir:
        raise ValueError(_not_from_a_release(good, wanted))
    dest = os.path.dirname(link)
    if wanted == "previous":
        names, current = [r["name"] for r in list_releases(dest)], current_release(dest)
        verdicts = verdicts_of(dest, good)
        wanted = choose_previous(names, current, verdicts) if current else previous_without_current(names, verdicts)
    folder, commit = release_dir_of(dest, wanted)
    check_intact(wanted, folder)
    return Target(wanted, folder, commit, [str(_moved(a, good_dir, folder)) for a in argv],
                  _moved(chdir, good_dir, folder),
                  dict((key, str(_moved(value, good_dir, folder))) for key, value in env.items()))


def op_rollback(args: RollbackArgs) -> RollbackReply:
    if args.get("step") == "undo":
        return undo(args)
    if args.get("step", "start") != "start":
        return {"error": f"unknown rollback step {args.get('step')!r}"}
    return start(args)


def start(args: RollbackArgs) -> RollbackReply:
    """Stop the job, switch current, start the target's launch; the controller verifies it."""
    pidfile = args["pidfile"]
    good = read_good(pidfile)
    if good is None:
        return {"outcome": "no_good_run", "why": "no last good run is recorded for this job "
                f"({pidfile_paths(pidfile)['good']} is missing): a run is recorded when verify passes"}
    target: Target | None = None
    refused = ""
    try:  # before this restart's failure is recorded: its known_failed is a verdict from before it
        target = target_of(good, args.get("release"))
    except (ValueError, OSError) as exc:
        refused = str(exc)
    if args.get("failed") and args.get("auto") and not args.get("check_mode"):
        _mark_failed_launch(pidfile, good, args["failed"], args.get("checks"))
    if target is None:
        return {"outcome": "failed", "why": refused}
    reply: RollbackReply = {"release": target.release, "commit": target.commit, "argv": target.argv,
                        "chdir": target.chdir}
    if target.known_failed:
        reply["known_failed"] = target.known_failed
    pid, begun = read_pidfile(pidfile)
    link = good.get("link") if target.release_dir else None
    running = bool(pid and alive(pid, begun))
    stale = None if target.release_dir else _stale_link(pidfile, reply)
    if args.get("auto") and running and pid == good.get("pid") and begun == good.get("start"):
        reply["outcome"] = "nothing"
        reply["pid"] = pid
        return _keep_good_current(reply, target, link, bool(args.get("check_mode")))
    if args.get("keep_running") and running:
        # The restart failed its launch check, before its stop: the job that runs is the one
        # the restart found, good run or not; nothing is stopped or started in its place.
        reply["outcome"], reply["pid"] = "kept", pid
        return _keep_running_current(reply, pidfile, pid, good.get("link"), bool(args.get("check_mode")))
    changing = link or stale
    reply["switched_from"] = current_release(os.path.dirname(changing)) if changing else None
    if stale and args.get("check_mode"):
        reply["unlinked"] = stale  # would be removed
    problem = None if args.get("check_mode") else _keep_prior(pidfile, pid, running and not args.get("auto"), good)
    if problem:
        reply["outcome"], reply["why"] = "failed", problem
        return reply
    stop: KillArgs = {"pidfile": pidfile, "grace": float(args.get("grace", 10)),
                      "check_mode": bool(args.get("check_mode"))}
    if args.get("pattern"):
        stop["pattern"] = args["pattern"]
    try:
        stopped = op_kill(stop)
    except Refused as exc:
        reply["outcome"], reply["why"] = "failed", f"cannot stop the job: {exc}"
        return reply
    reply["stopped"] = [p["pid"] for p in stopped.get("killed", [])]
    if args.get("check_mode"):
        reply["outcome"] = "would"
        return reply
    if stopped.get("error"):
        reply["outcome"], reply["why"] = "failed", f"cannot stop the job: {stopped['error']}"
        return reply
    return _relaunch(good, target, link, reply, pidfile, stale)


def _stale_link(pidfile: str, reply: RollbackReply) -> str | None:
    """For a rollback to a run with no release (a plain deploy's): the `current` link of the
    release the job's last launch ran from (the failed launch, or the job a rollback by hand
    stops), where it still points to that release and no other job runs from it. The plain
    run is not that release, so the link is removed rather than left to say that it runs (and
    to be the next deploy's "previous"). A link that points elsewhere (a deploy of another job
    sharing code_dest switched it since) says what runs: it stays; so does one to a release
    another job runs from, the reply's current_kept saying why. The job's own tree is not
    another job: the rollback stops it next."""
    release_dir = (launch_record(pidfile) or {}).get("release_dir")
    link = link_of(release_dir)
    if not link or not release_dir or not os.path.islink(link) or not current_release(os.path.dirname(link)):
        return None
    if os.path.realpath(link) != os.path.realpath(release_dir):
        return None
    dest, release = os.path.dirname(link), os.path.basename(release_dir.rstrip("/"))
    limits: list[str] = []
    kept = used_by_others(dest, release, pidfile, job_tree(pidfile), limits)
    if limits:
        reply["scan_limits"] = limits[0]
    if kept:
        reply["current_kept"] = f"({link} -> release {release}) kept: {kept}"
        return None
    return link


def _keep_prior(pidfile: str, pid: int | None, keep: bool, good: GoodRun) -> str | None:
    """A hand rollback keeps the launch of the run it stops, to start it again should its own
    target fail (undo), with the checks it passed where it is the last good run, for undo's
    verify; why it cannot, before anything is stopped, or None. A launch record
    that is there but cannot be read is such a why: the run would be stopped for good, and a
    failed rollback would then say that nothing ran before it."""
    try:
        before = load_launch_record(pidfile) if keep else None
    except Unreadable as exc:
        return (f"cannot keep the launch of the running job (pid {pid}) to start it again should the rollback fail: "
                f"its launch record {exc.path} is unreadable ({exc.why}); nothing was stopped (stop the job first "
                "to roll back without keeping it)")
    if not before or before.get("pid") != pid or not before.get("argv"):
        drop_prior(pidfile)
        return None
    same = before.get("start") is not None and before.get("start") == good.get("start") and pid == good.get("pid")
    problem = save_prior(pidfile, before, good.get("checks") if same else None)
    return (f"cannot keep the launch of the running job (pid {pid}) to start it again should the rollback fail: "
            f"{problem}; nothing was stopped") if problem else None


def _mark_failed_launch(pidfile: str, good: GoodRun, why: str, checks: VerifyArgs | None) -> None:
    """After a restart failed at its launch or verify (`checks`: the verify arguments it was
    judged by): record the release that launch ran as failed, where it is a launch made since
    the last good run was verified (not that run's). A release that passed with other
    settings stays passed (mark_release): a redeploy of the same code with a bad argument,
    environment or check is no fault of the code."""
    meta = launch_record(pidfile)
    if not meta or not meta.get("release_dir"):
        return
    if meta.get("pid") is not None and meta.get("pid") == good.get("pid") and meta.get("start") == good.get("start"):
        return
    if (meta.get("started_at") or 0.0) <= (good.get("verified_at") or 0.0):
        return
    mark_release(meta.get("release_dir"), "failed", meta.get("pid"), why, run_settings(meta, checks))


def _keep_good_current(reply: RollbackReply, target: Target, link: str | None, check_mode: bool) -> RollbackReply:
    """The good run still runs: `current` goes back to its release where a deploy switched it
    to another (one never verified), so the next launch through it is the good code."""
    if link and target.release_dir and not check_mode:
        _current_back_to(reply, link, target.release_dir)
    return reply


def _keep_running_current(reply: RollbackReply, pidfile: str, pid: int | None, link: str | None,
                          check_mode: bool) -> RollbackReply:
    """A job kept running: `current` (the good run's link: the job's code_dest) goes back to
    the release the job was launched from, where the failed restart's deploy switched it (its
    launch record names that release)."""
    meta = load_launch_record(pidfile) or {}
    release_dir = meta.get("release_dir")
    reply["release"], reply["commit"] = meta.get("release"), meta.get("commit")
    if link and release_dir and meta.get("pid") == pid and os.path.isdir(release_dir) and not check_mode:
        _current_back_to(reply, link, release_dir)
    return reply


def _current_back_to(reply: RollbackReply, link: str, release_dir: str) -> None:
    """`current` to release_dir where it names another release (the reply says from which)."""
    now = current_release(os.path.dirname(link))
    if now != os.path.basename(release_dir):
        switch_link(link, release_dir)
        reply["switched_from"] = now


def _relaunch(good: GoodRun, target: Target, link: str | None, reply: RollbackReply, pidfile: str,
              stale: str | None) -> RollbackReply:
    """Switch current to the target's release (or remove a stale `current` where the target
    has none) and start its launch; not verified here."""
    if link and target.release_dir:
        switch_link(link, target.release_dir)
    elif stale:
        remove_link(stale)
        reply["unlinked"] = stale
    pid, start, why = _start(pidfile, target.argv, target.env, target.chdir, good.get("log"), good.get("umask"),
                             link)
    _verify_with(reply, good)
    reply["outcome"] = "launched"
    if pid:
        reply["pid"], reply["start"], reply["exit_file"] = pid, start, pidfile_paths(pidfile)["exit"]
    if why:
        reply["why"] = why
    return reply


def _verify_with(reply: RollbackReply, run: GoodRun) -> None:
    """What the controller verifies a started run with: the log its launch writes, and the
    checks it passed when it was recorded good (none in an older record: the given ones)."""
    reply["log"] = run.get("log")
    if "checks" in run:
        reply["checks"] = run["checks"]


def _start(pidfile: str, argv: list[str], env: dict[str, str], chdir: str | None, log: str | None,
           umask: str | None, link: str | None,
           job: str = "the relaunched job") -> tuple[int | None, int | None, str | None]:
    """Launch as launch_detached does (its own supervisor, in a session of its own): (its
    pid, its start time, why it failed at once or None, naming it `job`)."""
    launch: LaunchArgs = {"argv": argv, "env": env, "pidfile": pidfile}
    if chdir:
        launch["chdir"] = chdir
    if log:
        launch["log"] = log
    if umask:
        launch["umask"] = umask
    if link:
        launch["release_link"] = link
    started = op_launch(launch)
    if started.get("error") or "pid" not in started:
        return None, None, f"the relaunch failed: {started.get('error')}"
    ended = started.get("exited")
    if ended:
        how = f"signal {ended['signal']}" if ended.get("signal") else f"code {ended.get('returncode')}"
        return started["pid"], None, f"{job} (pid {started['pid']}) exited at once with {how}"
    return started["pid"], started.get("start"), None


def undo(args: RollbackArgs) -> RollbackReply:
    """The rollback's relaunch failed (at once, or its verify): record its release as failed;
    after a hand rollback, start what was running before again (the controller verifies it);
    else put `current` back where it was when nothing runs from the release it was switched to."""
    pidfile = args["pidfile"]
    meta = launch_record(pidfile) or {}
    if args.get("release") and meta.get("release") == args.get("release"):
        mark_release(meta.get("release_dir"), "failed", meta.get("pid"), args.get("why"),
                     run_settings(meta, args.get("checks")))
    try:
        prior = None if args.get("auto") else take_prior(pidfile)
    except Unreadable as exc:  # something ran before, but what is unknown: never said to be nothing
        reply = _switch_back(pidfile, (read_good(pidfile) or {}).get("link"), args.get("back_to"))
        reply["prior_error"] = f"its saved launch {exc.path} is unreadable: {exc.why}"
        return reply
    if prior is None:
        return _switch_back(pidfile, (read_good(pidfile) or {}).get("link"), args.get("back_to"))
    return _restore(args, prior)


def _switch_back(pidfile: str, link: str | None, before: str | None) -> RollbackReply:
    """`current` back to where it was, unless the failed relaunch still runs from the release
    it was switched to (a hung relaunch): then it and `current` stay."""
    reply: RollbackReply = {"outcome": "failed", "running": None}
    pid, begun = read_pidfile(pidfile)
    if pid and alive(pid, begun):
        reply["running"] = pid
        return reply
    if not link or not before or before == current_release(os.path.dirname(link)):
        return reply
    before_dir = os.path.join(releases_dir(os.path.dirname(link)), before)
    if os.path.isdir(before_dir):
        switch_link(link, before_dir)
        reply["switched_back"] = before
    return reply


def _restore(args: RollbackArgs, prior: GoodRun) -> RollbackReply:
    """Stop the failed relaunch, switch current back to the prior run's release, start the
    prior run's recorded launch again."""
    pidfile = args["pidfile"]
    reply: RollbackReply = {"outcome": "failed", "release": prior.get("release"), "commit": prior.get("commit"),
                        "running": None}
    stop: KillArgs = {"pidfile": pidfile, "grace": float(args.get("grace", 10))}
    try:
        stopped = op_kill(stop)
        error = stopped.get("error")
    except Refused as exc:
        error = str(exc)
    if error:
        pid, begun = read_pidfile(pidfile)
        reply["running"] = pid if pid and alive(pid, begun) else None
        reply["restore_error"] = f"cannot stop the failed relaunch: {error}"
        return reply
    link, folder = prior.get("link"), prior.get("release_dir")
    if link and folder:
        if not os.path.isdir(folder):
            reply["restore_error"] = f"its release {prior.get('release')} is gone ({folder} is missing)"
            return reply
        if current_release(os.path.dirname(link)) != prior.get("release"):
            switch_link(link, folder)
            reply["switched_back"] = str(prior.get("release"))
    pid, start, why = _start(pidfile, list(prior.get("argv") or []), dict(prior.get("env") or {}),
                             prior.get("chdir"), prior.get("log"), prior.get("umask"), link if folder else None,
                             "the job started again")
    if pid:
        reply["pid"], reply["start"], reply["exit_file"] = pid, start, pidfile_paths(pidfile)["exit"]
    _verify_with(reply, prior)
    if why:
        reply["restore_error"] = why
        return reply
    reply["outcome"] = "restoring"
    return reply
