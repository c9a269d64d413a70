#!/bin/bash
# Makes .devbench/ (ignored), what bench/on_device.sh needs on a lent machine that reaches no
# package index: wheels for its Python 3.12, and Debian's sshd, ssh-keygen and pgrep with their
# shared libraries (used there only where the machine has none). Run here, from the repository
# root, with opsrunner's venv: bench/device_payload.sh
set -euo pipefail
dev=.devbench
grep -qx '/.devbench/' .git/info/exclude 2>/dev/null || echo /.devbench/ >> .git/info/exclude
mkdir -p "$dev/whl" "$dev/whl-own" "$dev/ssh/bin" "$dev/ssh/lib"
platforms=()
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
done
download() { .venv/bin/python -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" --platform any "$@"; }
download -d "$dev/whl" fabric==3.2.3 paramiko==4.0.0 invoke==2.2.1 pyinfra==3.10.0 jsonschema apprise croniter jinja2 pyyaml
download --no-deps -d "$dev/whl-own" "paramiko==$(.venv/bin/python -c 'import paramiko; print(paramiko.__version__)')"
cp /usr/sbin/sshd /usr/bin/ssh-keygen /usr/bin/pgrep "$dev/ssh/bin/"
for lib in $(ldd /usr/sbin/sshd /usr/bin/ssh-keygen /usr/bin/pgrep | awk '$3 ~ /^\// {print $3}' | sort -u); do
    case $(basename "$lib") in libc.so*|libresolv.so*|libm.so*|libpthread*|libdl.so*) ;; *) cp -L "$lib" "$dev/ssh/lib/" ;; esac
done
du -sh "$dev"
