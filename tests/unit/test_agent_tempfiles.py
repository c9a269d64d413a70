"""The agent writes files by a temporary file and a rename (pidfiles, launch records, deployed
files). The temporary name must not be one a planted link can wait at: in a shared directory
(/tmp, a home on NFS) a link at `<file>.opsrunner-tmp-<pid>` used to be followed - as root,
into any file - and hosts with equal pids (PID namespaces) wrote through one name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.agent_ns import unpack_agent

PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[2])
from opsrunner_agent.atomic import write_atomic
d = sys.argv[1]
victim = os.path.join(d, "victim")
with open(victim, "w") as fh:
    fh.write("keep")
path = os.path.join(d, "job.pid")
first = b"\\x00" * 6
for suffix in (str(os.getpid()), first.hex()):  # the pid, and the name the next draw gives
    os.symlink(victim, path + ".opsrunner-tmp-" + suffix)
draws = iter([first, b"\\x01" * 6])
os.urandom = lambda n: next(draws)
write_atomic(path, b"123\\n")
with open(victim) as fh, open(path) as written:
    print(json.dumps({"victim": fh.read(), "written": written.read(), "islink": os.path.islink(path),
                      "entries": sorted(os.listdir(d))}))
"""


def test_write_atomic_never_follows_a_link_planted_at_its_temporary_name(tmp_path: Path) -> None:
    agent = unpack_agent(tmp_path / "agent")
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run([sys.executable, "-S", "-c", PROBE, str(work), str(agent)],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    report = json.loads(out)
    assert report["victim"] == "keep"
    assert (report["written"], report["islink"]) == ("123\n", False)
    # the file, the victim and the two planted links; no temporary file of its own left
    assert len(report["entries"]) == 4 and "job.pid" in report["entries"]
