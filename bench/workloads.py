"""The benchmark's two workloads, written for each tool: opsrunner, ansible-core, pyinfra, and
a plain Fabric script as the floor. Each host works in its own directory under ROOT/<host>."""

from __future__ import annotations

import json
from pathlib import Path

TRIVIAL_TASKS = 10
#: The trivial workload's task list; opsrunner and ansible-core read the same YAML.
TRIVIAL_YAML = "".join(f"    - {{name: t{i}, command: 'true'}}\n" for i in range(TRIVIAL_TASKS))


def opsrunner_playbook(workload: str, root: Path, launch_settle: float | None = None,
                       strategy: str | None = None, launch_check: bool = True) -> str:
    """launch_settle: the launch's `settle` (None: its default, a 0.25 s watch for a job that
    ends at once, which none of the other tools keeps; 0: return at the exec's handshake, as
    the restart role launches). strategy: the play's (None: the default, linear).
    launch_check: as the restart role, check that the new job can start before the kill
    (launch_detached check_only; False for a checkout from before it)."""
    head = "- hosts: all\n" + (f"  strategy: {strategy}\n" if strategy else "")
    if workload == "trivial":
        return head + "  tasks:\n" + TRIVIAL_YAML
    d = f"{root}/{{{{ inventory_hostname }}}}"
    settle = "" if launch_settle is None else f", settle: {launch_settle:g}"
    job = f'argv: [sleep, "{{{{ marker }}}}"], log: "{d}/job.log", pidfile: "{d}/job.pid"'
    check = f"    - {{name: check, launch_detached: {{{job}, check_only: true}}}}\n" if launch_check else ""
    return head + f"""  tasks:
    - {{name: copy, deploy_code: {{src: {root}/payload.bin, dest: "{d}/code/payload.bin"}}}}
{check}    - {{name: cache, clear_cache: {{paths: ["{d}/cache"]}}}}
    - {{name: kill, kill_old: {{pidfile: "{d}/job.pid", grace: 5}}}}
    - name: launch
      launch_detached: {{{job}{settle}}}
    - {{name: verify, verify: {{pidfile: "{d}/job.pid", processes: 1, log: "{d}/job.log", log_exists: true}}}}
"""


def ansible_playbook(workload: str, root: Path) -> str:
    if workload == "trivial":
        return "- hosts: all\n  gather_facts: false\n  tasks:\n" + TRIVIAL_YAML
    d = f"{root}/{{{{ inventory_hostname }}}}"
    return f"""- hosts: all
  gather_facts: false
  tasks:
    - file: {{path: "{d}/code", state: directory}}
    - copy: {{src: {root}/payload.bin, dest: "{d}/code/payload.bin"}}
    - file: {{path: "{d}/cache", state: absent}}
    - shell: 'if [ -f {d}/job.pid ]; then kill $(cat {d}/job.pid) 2>/dev/null; sleep 0.2; fi; true'
    - shell: 'setsid sleep {{{{ marker }}}} > {d}/job.log 2>&1 < /dev/null & echo $! > {d}/job.pid; echo started >> {d}/job.log'
    - shell: 'test "$(pgrep -cf "^sleep {{{{ marker }}}}")" -eq 1 && test -f {d}/job.log'
"""


def pyinfra_deploy(workload: str, root: Path) -> str:
    if workload == "trivial":
        return "from pyinfra.operations import server\n" + "".join(
            f"server.shell(name='t{i}', commands=['true'])\n" for i in range(TRIVIAL_TASKS))
    return f"""from pyinfra import host
from pyinfra.operations import files, server
d = "{root}/" + host.name
marker = host.data.marker
files.directory(name="mkdir", path=d + "/code")
files.put(name="copy", src="{root}/payload.bin", dest=d + "/code/payload.bin")
files.directory(name="cache", path=d + "/cache", present=False)
server.shell(name="kill", commands=["if [ -f " + d + "/job.pid ]; then kill $(cat " + d + "/job.pid) 2>/dev/null; sleep 0.2; fi; true"])
server.shell(name="launch", commands=["setsid sleep " + marker + " > " + d + "/job.log 2>&1 < /dev/null & echo $! > " + d + "/job.pid; echo started >> " + d + "/job.log"])
server.shell(name="verify", commands=['test "$(pgrep -cf "^sleep ' + marker + '")" -eq 1 && test -f ' + d + '/job.log'])
"""


def fabric_script(workload: str, root: Path, hosts: list[dict[str, object]]) -> str:
    """The floor: one Fabric connection per host, commands sent in sequence, threads across hosts."""
    if workload == "trivial":
        body = f"    for _ in range({TRIVIAL_TASKS}):\n        c.run('true', hide=True)\n"
    else:
        body = (
            "    d = f'{ROOT}/{h[\"name\"]}'\n"
            "    c.run(f'mkdir -p {d}/code', hide=True)\n"
            "    c.put(f'{ROOT}/payload.bin', f'{d}/code/payload.bin')\n"
            "    c.run(f'rm -rf {d}/cache', hide=True)\n"
            "    c.run(f'if [ -f {d}/job.pid ]; then kill $(cat {d}/job.pid) 2>/dev/null; sleep 0.2; fi; true', hide=True)\n"
            "    c.run(f'setsid sleep {h[\"marker\"]} > {d}/job.log 2>&1 < /dev/null & echo $! > {d}/job.pid', hide=True)\n"
            "    c.run(f'test \"$(pgrep -cf \"^sleep {h[\"marker\"]}\")\" -eq 1 && test -f {d}/job.log', hide=True)\n"
        )
    return f"""import json, sys
from concurrent.futures import ThreadPoolExecutor
from fabric import Connection
ROOT = {str(root)!r}
HOSTS = json.loads({json.dumps(json.dumps(hosts))})
def work(h):
    c = Connection('127.0.0.1', user=h['user'], port=h['port'], connect_kwargs={{'key_filename': [h['key']]}})
{body}    c.close()
with ThreadPoolExecutor(max_workers=len(HOSTS)) as pool:
    list(pool.map(work, HOSTS))
"""
