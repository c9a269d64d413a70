#!/bin/bash
# The bench on a bare lent machine of many cores, where the 50 hosts' sshd, agents and jobs do
# not share the controller's 2 cores (bench/RESULTS.md, "Run 27"). That machine reaches no
# package index: what it lacks travels in the ignored folder .devbench/, made here beforehand
# by bench/device_payload.sh:
#   whl/      wheels (Python 3.12, manylinux x86-64) of fabric 3.2.3, paramiko 4.0.0, pyinfra
#             3.10.0 and everything both need: the venv of the tools opsrunner is compared with
#   whl-own/  paramiko 5.1.0, the version opsrunner's own venv runs on
#   ssh/      Debian's sshd, ssh-keygen and pgrep with the shared libraries they link, used
#             only where the machine has none of its own
# Usage, from the repository root (it sets the machine up, then runs the Python script given
# with opsrunner's venv and PYTHONPATH; the other tools' venv is /tmp/others-venv):
#   bench/on_device.sh bench/bench.py --others-venv /tmp/others-venv --hosts 1,50 ...
#   bench/on_device.sh bench/shards.py --hosts 50 --shards 2,4,8
set -euo pipefail
repo=$(pwd)
dev=$repo/.devbench
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(uname -r)"

# ssh: the machine's own, else the carried one behind wrappers that find its libraries.
wrap=/usr/local/bin
for tool in sshd ssh-keygen pgrep; do
    if ! command -v "$tool" >/dev/null; then
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$dev/ssh/lib" "$dev/ssh/bin/$tool" > "$wrap/$tool"
        chmod 755 "$wrap/$tool" "$dev/ssh/bin/$tool"
        echo "$tool: carried (Debian's), through $wrap/$tool"
    fi
done
if [ "$(id -u)" = 0 ] && ! id sshd >/dev/null 2>&1; then
    useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd  # sshd's privilege separation user
fi
mkdir -p /run/sshd && chmod 755 /run/sshd
# The agent runs as `python3` from the PATH sshd gives a session.
if [ ! -x /usr/bin/python3 ] && [ ! -x /usr/local/bin/python3 ]; then
    ln -s "$(command -v python3)" /usr/local/bin/python3
fi
ulimit -n 65536 2>/dev/null || true

# Two venvs, as here: the other tools' (paramiko 4.0.0) and opsrunner's own (paramiko 5.1.0).
python3 -m venv /tmp/others-venv
/tmp/others-venv/bin/pip install -q --no-index --find-links "$dev/whl" \
    fabric==3.2.3 paramiko==4.0.0 pyinfra==3.10.0
python3 -m venv /tmp/own-venv
/tmp/own-venv/bin/pip install -q --no-index --find-links "$dev/whl-own" --find-links "$dev/whl" \
    paramiko==5.1.0 fabric==3.2.3 invoke jinja2 pyyaml jsonschema apprise croniter

PYTHONPATH=$repo exec /tmp/own-venv/bin/python "$@"
