"""Where exec would find a program, checked as exec would (launch's preflight, the GPU probe)."""
from __future__ import annotations

import os
import stat

# typing is imported by the type checker alone: never at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


def resolve_program(name: str, env: Mapping[str, str], chdir: str | None) -> tuple[str, None] | tuple[None, str]:
    """(error or None, path): where execvpe would find `name`, checked as exec would."""
    search = env.get("PATH") or os.environ.get("PATH") or os.defpath
    if "/" in name:
        candidates = [os.path.join(chdir or os.getcwd(), name)]
    else:
        candidates = [os.path.join(d or ".", name) for d in search.split(":")]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return None, path
    for path in candidates:
        if os.path.isdir(path):
            return f"program {path} is a directory", None
        if os.path.exists(path):
            return f"program {path} is not executable (mode {stat.S_IMODE(os.stat(path).st_mode):04o})", None
    if "/" in name:
        return f"program {candidates[0]} not found on the target", None
    return f"program {name} not found on the target (searched PATH={search})", None
