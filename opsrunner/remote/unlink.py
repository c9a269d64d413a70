# opsrunner-agent part: removing a `current` link that would lie. Where what runs (or is
# deployed) is no release (a plain deploy into <dest> itself, or a rollback to a plain
# deploy's last good run), `current` is removed rather than left naming a release that does
# not run (and that the next deploy would take as its base and 'previous'), as Capistrano and
# Ansible's deploy_helper keep it: `current` names the live release, or is absent where none
# is. The releases themselves stay. Another job that runs from that release keeps it: its
# launch record beside the pidfile names it, or a live process uses it (inuse.py) that is not
# the job's own where a stop of the job follows (its tree as kill_old selects it), or which
# processes use it cannot be told. The rollback (rollback.py) and the plain deploy
# (op_unlink_current) both decide here.
from __future__ import annotations

import os

from .guards import Refused
from .jobfiles import as_launch_record, launch_record, live_supervisors, pidfile_paths
from .procs import alive, select, table
from .reads import NotRegular, read_json
from .releases import current_link, current_release, releases_dir, used_by_processes
from .watchdog import ignored

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection

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


def used_by_others(dest: str, release: str, pidfile: str | None, own: Collection[int] = (),
                   limits: list[str] | None = None) -> str | None:
    """Why release `release` of dest is another job's (a live job of a launch record beside the
    pidfile, or a live process, not one of `own`, that uses it), or why which processes use it
    cannot be told; None when none does. `limits` gets what the scan could not see."""
    real = os.path.join(releases_dir(os.path.realpath(dest)), release)
    why = _other_launch(pidfile, real) if pidfile else None
    if why:
        return why
    scan = used_by_processes(dest, [release], own)
    if limits is not None and scan.limits():
        limits.append(scan.limits())
    return scan.kept(release)


def remove_link(link: str) -> None:
    """Remove a `current` symlink (never anything else: a directory put there stays)."""
    if os.path.islink(link):
        with ignored(FileNotFoundError):
            os.unlink(link)


def job_tree(pidfile: str | None) -> set[int]:
    """The processes of the pidfile's job as kill_old selects them (the job, its group, its
    descendants, what it daemonized under its supervisors) and those supervisors: empty where
    the pidfile names no job (a pid that is not the launched one is nobody's own)."""
    if not pidfile:
        return set()
    procs = table()
    try:
        selected = select({"pidfile": pidfile}, procs)[0]
    except (Refused, NotRegular):
        return set()
    supervisors = live_supervisors(launch_record(pidfile), procs.get)
    return set(selected) | set(pair[0] for pair in supervisors)


def op_unlink_current(args: UnlinkCurrentArgs) -> UnlinkCurrentReply:
    """A plain deploy into dest: remove dest/current where it points to a release (check mode:
    say it would), unless another job runs from that release (then why it stays)."""
    dest = args["dest"]
    release = current_release(dest)
    if release is None:  # no link, or one of the user's own that names no release of dest
        return {"release": None}
    link = current_link(dest)
    reply: UnlinkCurrentReply = {"release": release, "link": link}
    pidfile = args.get("pidfile")
    limits: list[str] = []
    own = job_tree(pidfile) if args.get("stop_follows") else set()
    kept = used_by_others(dest, release, pidfile, own, limits)
    if limits:
        reply["scan_limits"] = limits[0]
    if kept:
        reply["kept"] = kept
        return reply
    if not args.get("check_mode"):
        remove_link(link)
    reply["unlinked"] = True
    return reply
