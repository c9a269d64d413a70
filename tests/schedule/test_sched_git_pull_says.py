"""`--git-pull` says what it pulled, on the output and in the run's notes: `pulled OLD..NEW`,
or `already up to date at COMMIT`; a run it refused prints its run id as every run does."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers import ProjectEnv


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _tracking_checkout(env: ProjectEnv, upstream: Path) -> str:
    """The project committed as a checkout that tracks `upstream` (a bare clone); its commit."""
    git(env.project, "init", "-q", "-b", "main")
    git(env.project, "add", "-A")
    git(env.project, "commit", "-qm", "v1")
    subprocess.run(["git", "clone", "-q", "--bare", str(env.project), str(upstream)], check=True)
    git(env.project, "remote", "add", "origin", str(upstream))
    git(env.project, "fetch", "-q", "origin")
    git(env.project, "branch", "-q", "--set-upstream-to=origin/main")
    return git(env.project, "rev-parse", "HEAD")


def test_git_pull_says_what_it_pulled(env: ProjectEnv, tmp_path: Path) -> None:
    upstream, work = tmp_path / "upstream.git", tmp_path / "work"
    old = _tracking_checkout(env, upstream)
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True)
    assert env.run("schedule", "add", "pull", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull").rc == 0
    (work / "inv.yml").write_text((work / "inv.yml").read_text() + "# v2\n")
    git(work, "commit", "-qam", "v2")
    git(work, "push", "-q", "origin", "HEAD:main")
    new = git(work, "rev-parse", "HEAD")

    res = env.run("schedule", "run", "pull")
    assert res.rc == 0, res.out + res.err
    assert res.out.splitlines()[0] == f"git pull: pulled {old}..{new}", res.out
    assert f"git pull: pulled {old}..{new}" in env.history()[0]["notes"]
    again = env.run("schedule", "run", "pull")
    assert again.rc == 0 and again.out.splitlines()[0] == f"git pull: already up to date at {new}", again.out
    assert f"git pull: already up to date at {new}" in env.history()[0]["notes"]

    (env.project / "inv.yml").write_text("# local edit\n")
    dirty = env.run("schedule", "run", "pull")
    refused = env.history()[0]
    assert dirty.rc == 2 and refused["result"] == "refused", refused
    assert dirty.out == f"run {refused['id']} (opsrunner show {refused['id']})\n", dirty.out


def test_git_pull_without_git_is_a_refused_run(env: ProjectEnv, tmp_path: Path) -> None:
    """A machine (a timer's PATH) without git: the run is refused and recorded with why, as a
    dirty checkout is; it ended in a traceback (exit 250) and no record said why."""
    _tracking_checkout(env, tmp_path / "upstream.git")
    assert env.run("schedule", "add", "pull", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull").rc == 0
    no_git = tmp_path / "bin"
    no_git.mkdir()
    env.vars["PATH"] = str(no_git)
    res = env.run("schedule", "run", "pull")
    del env.vars["PATH"]
    assert res.rc == 2, res.out + res.err
    assert "refusing to run: git is missing or did not answer within 300 s in " \
        f"{env.project}" in res.err
    assert "Traceback" not in res.out + res.err
    refused = env.history()[0]
    assert refused["result"] == "refused", refused


def test_git_pull_with_the_project_folder_gone_pulls_nothing_and_is_refused(env: ProjectEnv, tmp_path: Path) -> None:
    """The project folder moved away (a volume not mounted) inside another checkout: the run
    is refused and recorded; it pulled the checkout above it, then ended in a traceback."""
    outer = env.project.parent
    git(outer, "init", "-q", "-b", "main")
    (outer / "dot").write_text("a\n")
    git(outer, "add", "dot")
    git(outer, "commit", "-qm", "one")
    before = git(outer, "rev-parse", "HEAD")
    outer_up, other = tmp_path / "outer.git", tmp_path / "other"
    subprocess.run(["git", "clone", "-q", "--bare", str(outer), str(outer_up)], check=True)
    git(outer, "remote", "add", "origin", str(outer_up))
    git(outer, "fetch", "-q", "origin")
    git(outer, "branch", "-q", "--set-upstream-to=origin/main")
    subprocess.run(["git", "clone", "-q", str(outer_up), str(other)], check=True)
    (other / "dot").write_text("b\n")
    git(other, "commit", "-qam", "two")  # a commit the checkout above could pull
    git(other, "push", "-q", "origin", "HEAD:main")
    _tracking_checkout(env, tmp_path / "upstream.git")
    assert env.run("schedule", "add", "pull", "site.yml", "-i", "inv.yml", "--at", "daily", "--git-pull").rc == 0
    moved = tmp_path / "moved"
    env.project.rename(moved)
    try:
        res = env.run("schedule", "run", "pull", cwd=tmp_path)
    finally:
        moved.rename(env.project)
    assert res.rc == 2, res.out + res.err
    assert f"refusing to run: the project folder {env.project} is missing" in res.err
    assert "Traceback" not in res.out + res.err
    assert git(outer, "rev-parse", "HEAD") == before
    assert env.history()[0]["result"] == "refused"
