"""The agent as shipped: one zip built from the opsrunner/remote package, and the two small
boot scripts that bring it up on a target.

Cached (the usual way): a shell script looks for `$HOME/.cache/opsrunner/opsrunner_agent_<version>/`;
only when it is missing does it ask for the artifact (NEED_SOURCE on stdout) and unpack exactly
that many bytes of stdin into a temp directory renamed into place, so hosts that share a HOME
(NFS, containers with a bind-mounted home) can unpack at once. Then Python imports the package
from there and keeps its bytecode in __pycache__: no start after the first compiles anything.
Every unpacked file gets the same mtime (2000-01-01 UTC): Python keeps compiled bytecode valid
only for the mtime and size of its source, and copies written by hosts that share a HOME a
second apart would make it stale. A new version is a new directory: a target with an older
agent gets the new one.

Inline (a target where the cache cannot be written): the same zip follows the boot script on
stdin and the package is imported from memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import zipfile
from functools import lru_cache
from pathlib import Path

from opsrunner.packagedata import package_path
from opsrunner.remote.protocol import NEED_SOURCE, PACKAGE, package_digest_input

CACHE_DIR = "$HOME/.cache/opsrunner"
#: The first host threads of a run ask at once: one builds, the others wait for its result
#: (lru_cache lets each caller that misses compute: 32 of 50 hosts read and hashed the zip).
_BUILD_LOCK = threading.RLock()
#: The fixed mtime of unpacked files (see above), seconds since the epoch: 2000-01-01 UTC.
FIXED_MTIME = 946684800


def package_sources() -> dict[str, bytes]:
    """{file name: bytes} of every module of opsrunner/remote: the agent's package."""
    with _BUILD_LOCK:
        return _package_sources()


@lru_cache(maxsize=1)
def _package_sources() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(package_path("remote").glob("*.py"))}


def agent_version() -> str:
    """What the agent reports in its greeting (remote/server.py computes the same digest)."""
    with _BUILD_LOCK:
        return _agent_version()


@lru_cache(maxsize=1)
def _agent_version() -> str:
    return hashlib.sha256(package_digest_input(package_sources())).hexdigest()[:16]


def cache_name() -> str:
    return f"{PACKAGE}_{agent_version()}"


def agent_artifact() -> bytes:
    """The zip: PACKAGE/<module>.py for each module, byte for byte the same on every build.
    Kept in the controller's cache by version: every run needs its size (the start script
    takes it), and deflating the package cost ~16 ms of each run's start; reading it back
    and checking its contents against the version, ~1 ms."""
    with _BUILD_LOCK:
        return _agent_artifact()


@lru_cache(maxsize=1)
def _agent_artifact() -> bytes:
    kept = _controller_cache() / f"{cache_name()}.zip"
    with contextlib.suppress(OSError, ValueError, zipfile.BadZipFile, KeyError):
        data = kept.read_bytes()
        if _zip_version(data) == agent_version():
            return data
    data = _build_zip()
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs the build
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_name(f"{kept.name}.tmp-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, kept)
    return data


def _controller_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "opsrunner"


def _zip_version(data: bytes) -> str:
    """The version digest of the sources in a zip (a damaged or stale copy gives another)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        sources = {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}
    return hashlib.sha256(package_digest_input(sources)).hexdigest()[:16]


def _build_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in package_sources().items():
            info = zipfile.ZipInfo(f"{PACKAGE}/{name}", date_time=(2000, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


# Reads the zip (_READ_ZIP), unpacks it into a
# temp directory beside argv[2] and renames it into place; a concurrent start that won the
# rename is as good. The marker line keeps kill_old and verify away from it.
#: Both boot scripts start so: exactly argv[1] bytes of zip from stdin (os.read: nothing past them).
_READ_ZIP = """size = int(sys.argv[1])
data = b""
while len(data) < size:
    chunk = os.read(0, size - len(data))
    if not chunk:
        sys.exit(3)
    data += chunk
"""

_UNPACK = f"""# opsrunner-agent (unpack)
import io, os, shutil, sys, zipfile
{_READ_ZIP}final = sys.argv[2]
tmp = "%s.tmp-%s" % (final, os.urandom(6).hex())
zipfile.ZipFile(io.BytesIO(data)).extractall(tmp)
for folder, _dirs, files in os.walk(tmp):
    for name in files:
        os.utime(os.path.join(folder, name), ({FIXED_MTIME}, {FIXED_MTIME}))
try:
    os.rename(tmp, final)
except OSError:
    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.isdir(final):
        sys.exit(3)
"""

# $1 the cache directory's name, $2 the artifact's size, $3 the Python. Exit 3: not
# cacheable here (the controller then starts the agent inline).
START = (
    'd="' + CACHE_DIR + '"; p="$d/$1"; '
    'if [ ! -d "$p" ]; then printf "' + NEED_SOURCE.decode().replace("\0", "\\000") + '"; '
    'mkdir -p "$d" 2>/dev/null && "$3" -S -c "$0" "$2" "$p" || exit 3; fi; '
    'exec "$3" -S -c "# opsrunner-agent (cached)\nimport sys;sys.path.insert(0,sys.argv[1]);'
    'from ' + PACKAGE + '.server import main;main()" "$p"'
)

UNCACHE = 'rm -rf -- "' + CACHE_DIR + '/$1"'

# The package from memory: argv[1] bytes of zip on stdin first, then the protocol.
INLINE = f"""# opsrunner-agent (inline)
import io, os, sys, zipfile
from importlib.abc import Loader, MetaPathFinder
from importlib.util import spec_from_loader
{_READ_ZIP}archive = zipfile.ZipFile(io.BytesIO(data))
SOURCES = {{n.split("/", 1)[1]: archive.read(n) for n in archive.namelist()}}
class Memory(MetaPathFinder, Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "{PACKAGE}":
            return spec_from_loader(name, self, is_package=True)
        if name.startswith("{PACKAGE}.") and name.split(".", 1)[1] + ".py" in SOURCES:
            return spec_from_loader(name, self)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec(self.get_code(module.__name__), module.__dict__)
    def get_code(self, name):
        leaf = "__init__" if name == "{PACKAGE}" else name.split(".", 1)[1]
        return compile(SOURCES[leaf + ".py"], "<opsrunner-agent>/" + leaf + ".py", "exec")
sys.meta_path.insert(0, Memory())
from {PACKAGE}.server import main
main(SOURCES)
"""


def start_argv(python: str) -> list[str]:
    """The cached start: sh -c START, with the unpacker as $0."""
    return ["/bin/sh", "-c", START, _UNPACK, cache_name(), str(len(agent_artifact())), python]


def inline_argv(python: str) -> list[str]:
    return [python, "-S", "-c", INLINE, str(len(agent_artifact()))]
