#!/bin/sh
# Make sure OpenSSH's sshd exists for the test suite's private test server.
# The suite starts its own sshd on 127.0.0.1 with its own keys and config; this only
# installs the package when it is missing (Debian/Ubuntu). Nothing else is changed.
# First the dashboard's browser (chromium, tests/setup_browser.sh) and PostgreSQL for the
# shared history (tests/setup_postgres.sh), the other things the suite needs from the system.
set -e
sh "$(dirname "$0")/setup_browser.sh"
sh "$(dirname "$0")/setup_postgres.sh"
for p in /usr/sbin/sshd /usr/local/sbin/sshd /sbin/sshd; do
    [ -x "$p" ] && exit 0
done
if command -v sshd >/dev/null 2>&1; then exit 0; fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssh-server openssh-client >/dev/null
