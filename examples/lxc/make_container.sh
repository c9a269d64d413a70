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
# suite adds a bind mount). It is started at the end.
set -eu
name=${1:?usage: make_container.sh NAME [CONFIG_LINE...]}
shift
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
printf '%s\n' "lxc.net.0.type = none" "$@" > "$conf"
lxc-create -n "$name" -f "$conf" -t debian -- -r bookworm --packages=python3,procps
rootfs="$(lxc-config lxc.lxcpath)/$name/rootfs"
printf 'auto lo\niface lo inet loopback\n' > "$rootfs/etc/network/interfaces"
for unit in ssh.service ssh.socket apt-daily.timer apt-daily-upgrade.timer; do
    ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
done
lxc-start -n "$name"
echo "container $name is running: lxc-attach -n $name --keep-env -- python3 -V"
