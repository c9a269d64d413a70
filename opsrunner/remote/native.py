# opsrunner part (agent and watchdog): what the C library and the kernel offer, reached
# without the ctypes package (~4 ms to import at every start). Python >= 3.8, stdlib only.
import os


def load_prctl():
    """prctl(2) from the C library through _ctypes, or None where that is not possible."""
    try:
        import _ctypes

        class c_int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = c_int

        return Function(_ctypes.dlsym(_ctypes.dlopen(None, 0), "prctl"))
    except Exception:
        return None


def exit_code(status):
    """A wait status as a shell reports it: the exit code, or 128 + the signal that killed it."""
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _pidfd(pid):
    """A pidfd of `pid`, readable once it has exited (Linux >= 5.3, Python >= 3.9), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
