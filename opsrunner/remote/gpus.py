"""GPU memory per GPU, from nvidia-smi where the target has it (verify, kill_old's wait)."""
from __future__ import annotations

import os

from .programs import resolve_program

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence


def gpu_memory(gpus: Sequence[int | str] | None = None) -> dict[int, float] | None:
    """{index: used MB} from nvidia-smi, or None when there is no nvidia-smi."""
    if resolve_program("nvidia-smi", os.environ, None)[0]:
        return None  # no GPU tools here: no subprocess import, no failed exec (every verify asks)
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    used: dict[int, float] = {}
    for line in out.stdout.decode().splitlines():
        if "," in line:
            idx, mb = [x.strip() for x in line.split(",", 1)]
            if gpus is None or int(idx) in [int(g) for g in gpus]:
                used[int(idx)] = float(mb)
    return used
