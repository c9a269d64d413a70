#!/bin/sh
# Make sure LXC and debootstrap exist for the suite's real container (tests/lxc.py).
# Installs them only when missing (Debian/Ubuntu, as root, without recommended extras: so
# the debian template's own helpers are named here too, distro-info among them: without
# `debian-distro-info` the template writes a security suite that no longer exists).
# It never fails the test command: where they cannot be installed, the container tests
# are skipped and the suite's summary says why.
missing=""
for tool in lxc-create lxc-attach debootstrap rsync wget debian-distro-info; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "setup_lxc.sh: missing:$missing; not root, so not installed (the LXC tests will be skipped)" >&2
    exit 0
fi
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        lxc lxc-templates debootstrap rsync wget debian-archive-keyring distro-info >/dev/null; }; then
    echo "setup_lxc.sh: could not install lxc, debootstrap and distro-info (the LXC tests will be skipped)" >&2
fi
exit 0
