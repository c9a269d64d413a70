# opsrunner-agent part: rollback. Puts the job's last good run (goodrun.py) back: stops what
# runs from the pidfile now, switches <dest>/current back to the release, starts the recorded
# launch again (the same argv, env, chdir, log and umask) and verifies it. All of it happens
# here, on the target, so the job's environment (which may hold secrets) never travels to
# the controller: the reply names the release, the commit, the pid and the verdict only.
from __future__ import annotations

import os
import time

from .goodrun import read_good
from .guards import Refused
from .jobfiles import pidfile_paths, read_pidfile
from .launch import op_launch
from .procs import alive, op_kill
from .releases import changed_in_place, current_release, list_releases, release_dir_of, releases_dir, switch_link
from .verify import op_verify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_jobs import GoodRun, KillArgs, LaunchArgs, RollbackArgs, RollbackReply, VerifyArgs


class Target:
    """Where a rollback goes: the release (None without releases) and the launch to start."""
    __slots__ = ("argv", "chdir", "commit", "env", "release", "release_dir")

    def __init__(self, release: str | None, release_dir: str | None, commit: str | None, argv: list[str],
                 chdir: str | None, env: dict[str, str]) -> None:
        self.release, self.release_dir, self.commit = release, release_dir, commit
        self.argv, self.chdir, self.env = argv, chdir, env


#: Seconds kept at the end of the budget for the reply to travel back.
MARGIN_S = 1.0


def _moved(value: str | None, old: str | None, new: str | None) -> str | None:
    """A path or argument of the good run, moved from its release's directory to another's."""
    if value is None or not old or not new or old == new:
        return value
    if value == old:
        return new
    return value.replace(old + "/", new + "/")


def choose_previous(names: list[str], current: str | None) -> str:
    """The release before `current` (names oldest first); ValueError when there is none."""
    if current is None:
        raise ValueError("there is no current release to go back from")
    if current not in names:
        raise ValueError(f"the current release {current} is not among the releases")
    at = names.index(current)
    if at == 0:
        raise ValueError(f"there is no release before {current}")
    return names[at - 1]


def check_intact(release: str | None, release_dir: str | None) -> None:
    """ValueError when a file of the release was changed in place since its deploy (the
    code would not be the code that ran well): nothing may be stopped for it."""
    if not release_dir:
        return
    changed = changed_in_place(release_dir)
    if changed:
        raise ValueError(f"refusing to roll back to release {release}: {changed} (its files are hard links "
                         "shared with other releases; deploy a fix instead of editing one in place)")


def target_of(good: GoodRun, wanted: str | None) -> Target:
    """The release to roll back to (the good run's, "previous", or a name) and its launch;
    ValueError when it is changed in place."""
    argv, chdir, env = list(good.get("argv") or []), good.get("chdir"), dict(good.get("env") or {})
    link, good_dir = good.get("link"), good.get("release_dir")
    if not wanted:
        if good.get("release") and good_dir and not os.path.isdir(good_dir):
            raise ValueError(f"the last good run's release {good.get('release')} is gone ({good_dir} is missing)")
        check_intact(good.get("release"), good_dir)
        return Target(good.get("release"), good_dir, good.get("commit"), argv, chdir, env)
    if not link or not good_dir:
        raise ValueError("the last good run was not launched from a release (deploy_code releases: true): "
                         f"there is no release {wanted!r} to go to")
    dest = os.path.dirname(link)
    if wanted == "previous":
        wanted = choose_previous([r["name"] for r in list_releases(dest)], current_release(dest))
    folder, commit = release_dir_of(dest, wanted)
    check_intact(wanted, folder)
    return Target(wanted, folder, commit, [str(_moved(a, good_dir, folder)) for a in argv],
                  _moved(chdir, good_dir, folder),
                  dict((key, str(_moved(value, good_dir, folder))) for key, value in env.items()))


def op_rollback(args: RollbackArgs) -> RollbackReply:
    t0 = time.time()
    pidfile = args["pidfile"]
    good = read_good(pidfile)
    if good is None:
        return {"outcome": "no_good_run", "why": "no last good run is recorded for this job "
                f"({pidfile_paths(pidfile)['good']} is missing): a run is recorded when verify passes"}
    try:
        target = target_of(good, args.get("release"))
    except (ValueError, OSError) as exc:
        return {"outcome": "failed", "why": str(exc)}
    reply: RollbackReply = {"release": target.release, "commit": target.commit, "argv": target.argv,
                            "chdir": target.chdir}
    pid, start = read_pidfile(pidfile)
    link = good.get("link") if target.release_dir else None
    if args.get("auto") and pid and pid == good.get("pid") and start == good.get("start") and alive(pid, start):
        reply["outcome"] = "nothing"
        reply["pid"] = pid
        return _keep_good_current(reply, target, link, bool(args.get("check_mode")))
    reply["switched_from"] = current_release(os.path.dirname(link)) if link else None
    stop: KillArgs = {"pidfile": pidfile, "grace": float(args.get("grace", 10)),
                      "check_mode": bool(args.get("check_mode"))}
    if args.get("pattern"):
        stop["pattern"] = args["pattern"]
    try:
        stopped = op_kill(stop)
    except Refused as exc:
        reply["outcome"] = "failed"
        reply["why"] = f"cannot stop the job: {exc}"
        return reply
    reply["stopped"] = [p["pid"] for p in stopped.get("killed", [])]
    if args.get("check_mode"):
        reply["outcome"] = "would"
        return reply
    if stopped.get("error"):
        reply["outcome"] = "failed"
        reply["why"] = f"cannot stop the job: {stopped['error']}"
        return reply
    return _relaunch(args, good, target, link, reply, t0)


def _keep_good_current(reply: RollbackReply, target: Target, link: str | None, check_mode: bool) -> RollbackReply:
    """The good run still runs: `current` goes back to its release where a deploy switched it
    to another (one never verified), so the next launch through it is the good code."""
    if not link or not target.release_dir or check_mode:
        return reply
    now = current_release(os.path.dirname(link))
    if now != target.release:
        switch_link(link, target.release_dir)
        reply["switched_from"] = now
    return reply


def _relaunch(args: RollbackArgs, good: GoodRun, target: Target, link: str | None, reply: RollbackReply,
              t0: float) -> RollbackReply:
    """Switch current back, start the good run's launch again, verify it."""
    pidfile = args["pidfile"]
    if link and target.release_dir:
        switch_link(link, target.release_dir)
    launch: LaunchArgs = {"argv": target.argv, "env": target.env, "pidfile": pidfile}
    chdir, log, umask = target.chdir, good.get("log"), good.get("umask")
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
        return _failed(reply, f"the relaunch failed: {started.get('error')}", link, pidfile)
    reply["pid"] = started["pid"]
    ended = started.get("exited")
    if ended:
        how = f"signal {ended['signal']}" if ended.get("signal") else f"code {ended.get('returncode')}"
        return _failed(reply, f"the relaunched job (pid {started['pid']}) exited at once with {how}", link, pidfile)
    wanted: VerifyArgs = args.get("verify") or {"processes": 1}
    check = wanted.copy()
    check["pidfile"] = pidfile
    check["record_good"] = True
    if args.get("budget"):
        check["budget"] = max(1.0, float(args["budget"]) - (time.time() - t0) - MARGIN_S)
    verdict = op_verify(check)
    reply["status"] = verdict["status"]
    reply["verified"] = bool(verdict.get("ok"))
    reply["took_s"] = round(time.time() - t0, 2)
    if verdict.get("ok"):
        reply["outcome"] = "rolled_back"
        return reply
    return _failed(reply, f"the relaunched run failed verify: {verdict.get('diagnosis')}", link, pidfile)


def _failed(reply: RollbackReply, why: str, link: str | None, pidfile: str) -> RollbackReply:
    """A failed relaunch: `current` goes back to where it was when nothing runs from the
    release it was switched to (a hung relaunch still runs from it: it stays)."""
    reply["outcome"], reply["why"] = "failed", why
    before = reply.get("switched_from")
    if not link or not before or before == reply.get("release"):
        return reply
    pid, start = read_pidfile(pidfile)
    before_dir = os.path.join(releases_dir(os.path.dirname(link)), before)
    if (pid and alive(pid, start)) or not os.path.isdir(before_dir):
        return reply
    switch_link(link, before_dir)
    reply["why"] = f"{why}; current switched back to {before}"
    return reply
