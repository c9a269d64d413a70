"""Where exec would find a program, checked as exec would (launch's preflight, the GPU probe)."""
import os
import stat


def resolve_program(name, env, chdir):
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
            return "program %s is a directory" % path, None
        if os.path.exists(path):
            return "program %s is not executable (mode %04o)" % (path, stat.S_IMODE(os.stat(path).st_mode)), None
    if "/" in name:
        return "program %s not found on the target" % candidates[0], None
    return "program %s not found on the target (searched PATH=%s)" % (name, search), None
