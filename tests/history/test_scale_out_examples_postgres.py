"""The scale-out examples run as written: each file's exact opsrunner command lines, run at
once as its N controllers would (JOB_COMPLETION_INDEX=0..N-1 of the Indexed Job, the CI
matrix's values), against the suite's PostgreSQL. Each host runs once, under one group id,
and no example carries a password."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from opsrunner.history.location import passwords_of
from tests import pg
from tests.conftest import write_yaml
from tests.helpers import ROOT

EXAMPLES = ROOT / "examples"
PLAYBOOK = [{"name": "Touch", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "Mark", "shell": "echo {{ inventory_hostname }} >> {{ marks }}"}]}]
HOSTS = [f"trainer-{i:02d}" for i in range(10)]


def _project(root: Path) -> Path:
    """What the examples' command lines name: playbooks/restart_training.yml, inventory/fleet.yml."""
    project = root / "project"
    write_yaml(project / "playbooks" / "restart_training.yml", PLAYBOOK)
    write_yaml(project / "inventory" / "fleet.yml", {"all": {"vars": {"marks": str(root / "marks")},
                                                           "hosts": {h: {"connection": "local"} for h in HOSTS}}})
    return project


def _opsrunner_lines(script: str) -> list[str]:
    lines = [line.strip() for line in script.splitlines() if line.strip().startswith("opsrunner ")]
    assert lines, script
    return lines


def _run_at_once(project: Path, commands: list[tuple[str, dict[str, str]]]) -> None:
    path = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"  # the suite's opsrunner
    procs = [subprocess.Popen(["sh", "-c", line], cwd=project, env={**os.environ, "PATH": path, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for line, env in commands]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), outs
    assert not any("WARNING" in o for o in outs), outs


def _one_group(project: Path, root: Path, url: str, group: str, slices: int) -> None:
    assert sorted((root / "marks").read_text().split()) == HOSTS  # every host, each once
    env = {**os.environ, "OPSRUNNER_HISTORY": url, "PGPASSWORD": pg.PASSWORD, "PYTHONPATH": str(ROOT)}
    listing = subprocess.run([sys.executable, "-m", "opsrunner", "history", "--group", group, "--json"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=60)
    runs: list[dict[str, Any]] = json.loads(listing.stdout)
    assert sorted(r["slice"] for r in runs) == [f"{i}/{slices}" for i in range(1, slices + 1)]
    assert {r["run_group"] for r in runs} == {group}
    assert sorted(h for r in runs for h in r["recap"]) == HOSTS


def test_postgres_kubernetes_indexed_job_example_covers_each_host_once(pg_url: str, tmp_path: Path) -> None:
    cronjob = yaml.safe_load((EXAMPLES / "kubernetes" / "cronjob.yaml").read_text())
    job = cronjob["spec"]["jobTemplate"]["spec"]
    slices = job["completions"]
    assert job["completionMode"] == "Indexed" and job["parallelism"] == slices
    container = job["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"]  # the password from a Secret, never inline
    assert passwords_of(env["OPSRUNNER_HISTORY"]["value"]) == []
    assert env["OPSRUNNER_RUN_GROUP"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.labels['batch.kubernetes.io/job-name']"
    plain = {name: e["value"] for name, e in env.items() if "value" in e and name != "OPSRUNNER_HISTORY"}
    assert plain["SLICES"] == str(slices)
    group = "nightly-rollout-29412180"  # the Job's name, as the downward API gives it
    url = pg_url.replace(f":{pg.PASSWORD}@", "@")
    project = _project(tmp_path)
    commands = [(line, {**plain, "JOB_COMPLETION_INDEX": str(index), "OPSRUNNER_HISTORY": url,
                        "PGPASSWORD": pg.PASSWORD, "OPSRUNNER_RUN_GROUP": group})
                for index in range(slices) for line in _opsrunner_lines(container["args"][0])]
    assert len(commands) == slices
    _run_at_once(project, commands)
    _one_group(project, tmp_path, url, group, slices)


def test_postgres_github_actions_matrix_example_covers_each_host_once(pg_url: str, tmp_path: Path) -> None:
    workflow = yaml.safe_load((EXAMPLES / "ci" / "github-actions.yml").read_text())
    job = workflow["jobs"]["rollout"]
    matrix = job["strategy"]["matrix"]["slice"]
    assert re.fullmatch(r"\$\{\{ secrets\.\w+ \}\}", job["env"]["PGPASSWORD"])  # a CI secret, never inline
    assert "secrets." not in job["env"]["OPSRUNNER_HISTORY"] and "@" not in job["env"]["OPSRUNNER_HISTORY"]
    script = next(step["run"] for step in job["steps"] if "opsrunner play" in step.get("run", ""))
    url = pg_url.replace(f":{pg.PASSWORD}@", "@")
    commands = []
    for value in matrix:
        context = {"matrix.slice": str(value), "strategy.job-total": str(len(matrix)), "github.run_id": "8812345",
                   "github.run_attempt": "1"}
        for line in _opsrunner_lines(script):
            expanded = re.sub(r"\$\{\{ ([\w.-]+) \}\}", lambda m, c=context: c[m.group(1)], line)  # KeyError: unknown
            commands.append((expanded, {"OPSRUNNER_HISTORY": url, "PGPASSWORD": pg.PASSWORD}))
    assert len(commands) == len(matrix)
    project = _project(tmp_path)
    _run_at_once(project, commands)
    _one_group(project, tmp_path, url, "rollout-8812345-1", len(matrix))
