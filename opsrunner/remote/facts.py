# opsrunner-agent part: facts (Python >= 3.8, stdlib only; runs on targets). gather_facts asks
# for a small set restart procedures use: who and where, the OS, Python, NVIDIA GPUs.
from __future__ import annotations

import os
import sys

# typing and the messages' types are imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .protocol_host import Facts, FactsArgs, FactsReply, NvidiaGpu


def _os_release() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep:
                    out[key] = value.strip().strip('"')
    except OSError:
        pass
    return out


def _nvidia_gpus() -> list[NvidiaGpu]:
    """One dict per GPU from nvidia-smi; [] when there is no driver (not an error)."""
    import subprocess
    query = "index,name,uuid,memory.total,memory.used,utilization.gpu"
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=20,
                              text=True)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus: list[NvidiaGpu] = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 6:
            gpus.append({"index": int(parts[0]), "name": parts[1], "uuid": parts[2],
                         "memory_total_mb": int(float(parts[3])), "memory_used_mb": int(float(parts[4])),
                         "utilization_pct": int(float(parts[5])) if parts[5].replace(".", "").isdigit() else None})
    return gpus


def op_facts(args: FactsArgs) -> FactsReply:
    import getpass
    import platform
    import socket
    release = _os_release()
    uname = platform.uname()
    facts: Facts = {
        "hostname": socket.gethostname().split(".")[0], "fqdn": socket.getfqdn(), "nodename": uname.node,
        "user_id": getpass.getuser(), "user_uid": os.getuid(), "user_dir": os.path.expanduser("~"),
        "system": uname.system, "kernel": uname.release, "architecture": uname.machine,
        "distribution": release.get("NAME", ""), "distribution_version": release.get("VERSION_ID", ""),
        "os_family": release.get("ID_LIKE", release.get("ID", "")),
        "processor_vcpus": os.cpu_count(),
        "python_version": platform.python_version(),
        "python": {"executable": sys.executable, "version": {"major": sys.version_info[0],
                                                              "minor": sys.version_info[1],
                                                              "micro": sys.version_info[2]}},
        "nvidia_gpus": _nvidia_gpus(),
    }
    return {"facts": facts}
