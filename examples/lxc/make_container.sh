#!/bin/sh
# Make a Debian bookworm LXC container with python3, to rehearse restarts on the runtime
# `pct exec` uses (`pct exec CTID -- CMD` is `lxc-attach -n CTID --keep-env -- CMD`).
#
# usage (as root): sh examples/lxc/make_container.sh NAME [CONFIG_LINE...]
#
# The container uses the host's network (lxc.net.0.type = none: no bridge to set up), so
# before its first boot the image's DHCP client and sshd are switched off: they would
# otherwise run on the host's interface and port 22. Its own apt (Debian's archive) is
# used only while it is made. Extra arguments are appended to its LXC config (the test
# suite adds a bind mount). It is started at the end, and the script fails (exit 1, the
# container destroyed again) unless python3 runs in it.
#
# The debian template makes the base system only: its own package step picks the security
# suite with `debian-distro-info` and, where that is missing, writes the pre-bullseye
# `bookworm/updates`, apt fails with 404 and the template still exits 0. So this script
# writes the bookworm sources itself and installs the packages, stopping at the first
# apt error with apt's message. MIRROR and SECURITY_MIRROR are used as the template uses them.
set -eu
name=${1:?usage: make_container.sh NAME [CONFIG_LINE...]}
shift
# python3-venv: a venv for the test suite's opsrunner inside; cron and sudo: its schedule tests
packages="python3 python3-venv procps cron sudo"
mirror=${MIRROR:-http://deb.debian.org/debian}
security=${SECURITY_MIRROR:-http://security.debian.org/debian-security}
work=$(mktemp -d)
made=""
trap 'rm -rf "$work"' EXIT

fail() {  # the reason on one line (tests/lxc.py reports it), after the log lines that show it
    if [ -n "$made" ]; then
        lxc-stop -n "$name" -k >/dev/null 2>&1 || true
        lxc-destroy -n "$name" -f >/dev/null 2>&1 || true
        echo "make_container.sh: $name: FAILED: $*; the half-made container was destroyed" >&2
    else
        echo "make_container.sh: $name: FAILED: $*" >&2
    fi
    exit 1
}

errors() {  # apt's and the template's error lines in a log, on one line
    grep -E '^(E:|Err:|W: Failed|ERROR|Failed|failed)' "$1" | tail -n 4 | tr '\n' ' ' || true
}

printf '%s\n' "lxc.net.0.type = none" "$@" > "$work/config"
echo "making container $name (Debian bookworm: $packages)"
if ! lxc-create -n "$name" -f "$work/config" -t debian -- -r bookworm > "$work/create.log" 2>&1; then
    tail -n 25 "$work/create.log" >&2
    fail "lxc-create -t debian failed: $(errors "$work/create.log")"
fi
made=1
rootfs="$(lxc-config lxc.lxcpath)/$name/rootfs"

cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"  # no service starts in the chroot
chmod +x "$rootfs/usr/sbin/policy-rc.d"
if ! chroot "$rootfs" apt-get update > "$work/apt.log" 2>&1 || grep -qE '^(E:|Err:|W: Failed)' "$work/apt.log"; then
    cat "$work/apt.log" >&2
    fail "apt-get update in the container failed: $(errors "$work/apt.log")"
fi
if ! chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        $packages > "$work/apt.log" 2>&1; then
    tail -n 25 "$work/apt.log" >&2
    fail "apt-get install $packages in the container failed: $(errors "$work/apt.log")"
fi
chroot "$rootfs" apt-get clean
rm -f "$rootfs/usr/sbin/policy-rc.d"

printf 'auto lo\niface lo inet loopback\n' > "$rootfs/etc/network/interfaces"
for unit in ssh.service ssh.socket apt-daily.timer apt-daily-upgrade.timer; do
    ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
done

lxc-start -n "$name" || fail "lxc-start -n $name failed"
check='import ensurepip, shutil, sys, venv
missing = [t for t in ("crontab", "sudo", "ps") if shutil.which(t) is None]
assert not missing, "not installed: " + " ".join(missing)
print(sys.version.split()[0])'
tries=0
until version=$(lxc-attach -n "$name" -- python3 -c "$check" 2>&1); do
    tries=$((tries + 1))
    [ "$tries" -lt 20 ] || fail "python3 does not run in the container: $(echo "$version" | tail -n 2 | tr '\n' ' ')"
    sleep 0.5
done
echo "container $name is running with Python $version: lxc-attach -n $name --keep-env -- python3 -V"
