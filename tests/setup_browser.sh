#!/bin/sh
# Make sure Debian's chromium exists for the dashboard's browser tests (tests/web), which
# drive it through Playwright with executable_path=/usr/bin/chromium: Playwright never
# downloads a browser of its own (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD). Only installs the
# package when it is missing (Debian/Ubuntu). Called by tests/setup_sshd.sh, so the README's
# test command installs it too.
set -e
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
[ -x /usr/bin/chromium ] && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "setup_browser: no apt-get; install chromium yourself" >&2; exit 0; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
# Not fatal: without it the browser tests skip and say why (CI requires them: .ci/run).
{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } ||
    echo "setup_browser: could not install chromium; the dashboard's browser tests will skip" >&2
