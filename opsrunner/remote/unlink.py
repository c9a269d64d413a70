# opsrunner-agent part: removing a `current` link that would lie. Where what runs (or is
# deployed) is no release (a plain deploy into <dest> itself, or a rollback to a plain
# deploy's last good run), `current` is removed rather than left naming a release that does
# not run (and that the next deploy would take as its base and 'previous'), as Capistrano and
# Ansible's deploy_helper keep it: `current` names the live release, or is absent where none
# is. The releases themselves stay. Another job that runs from that release keeps it: its
# launch record beside the pidfile names it, or a live process outside the job's own session
# uses it (inuse.py). The rollback (rollback.py) and the plain deploy (op_unlink_current) both
# decide here.
from __future__ import annotations

import os

from .jobfiles import as_launch_record, pidfile_paths, read_pidfile
from .procs import alive, foreign_proc
from .reads import NotRegular, read_json
from .releases import current_link, current_release, releases_dir, used_by_processes
from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_files import UnlinkCurrentArgs, UnlinkCurrentReply


def _other_launch(pidfile: str, release_real: str) -> str | None:
    """A live job whose launch record beside this pidfile (not this job's) names the release."""
    folder, own = os.path.dirname(os.path.abspath(pidfile)), os.path.abspath(pidfile_paths(pidfile)["meta"])
    with ignored(OSError):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not name.endswith(".launch.json") or path == own:
                continue
            try:
                other = as_launch_record(read_json(path, "launch record") or {})
            except NotRegular:
                continue
            dir_, opid = other.get("release_dir"), other.get("pid")
            if dir_ and opid and os.path.realpath(dir_) == release_real and alive(opid, other.get("start")):
                return f"the job of {path} (pid {opid}) runs from it"
    return None


def used_by_others(dest: str, release: str, pidfile: str | None, sid: int | None) -> str | None:
    """Why release `release` of dest is another job's (a live job of a launch record beside the
    pidfile, or a live process outside session `sid`, this job's own, that uses it), or None."""
    real = os.path.join(releases_dir(os.path.realpath(dest)), release)
    why = _other_launch(pidfile, real) if pidfile else None
    if why:
        return why
    who = used_by_processes(dest, [release], sid).get(release)
    return f"{who} uses it" if who else None


def remove_link(link: str) -> None:
    """Remove a `current` symlink (never anything else: a directory put there stays)."""
    if os.path.islink(link):
        with ignored(FileNotFoundError):
            os.unlink(link)


def job_session(pidfile: str | None) -> int | None:
    """The session of the pidfile's live job (its processes are not "another job"), or None."""
    pid, start = read_pidfile(pidfile) if pidfile else (None, None)
    return pid if pid and alive(pid, start) else None


def op_unlink_current(args: UnlinkCurrentArgs) -> UnlinkCurrentReply:
    """A plain deploy into dest: remove dest/current where it points to a release (check mode:
    say it would), unless another job runs from that release (then why it stays)."""
    dest = args["dest"]
    release = current_release(dest)
    if release is None:  # no link, or one of the user's own that names no release of dest
        return {"release": None}
    link = current_link(dest)
    reply: UnlinkCurrentReply = {"release": release, "link": link}
    foreign = foreign_proc()  # asked only here: a plain deploy with no `current` needs no pids
    kept = (f"which processes use it cannot be told: {foreign}" if foreign else
            used_by_others(dest, release, args.get("pidfile"), job_session(args.get("pidfile"))))
    if kept:
        reply["kept"] = kept
        return reply
    if not args.get("check_mode"):
        remove_link(link)
    reply["unlinked"] = True
    return reply
