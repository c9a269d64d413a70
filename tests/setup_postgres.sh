#!/bin/sh
# Make sure Debian's PostgreSQL server exists for the shared-history tests (tests/history,
# "postgres" in their names): the suite starts a private cluster of its own (tests/pg.py:
# initdb in a temp dir, 127.0.0.1 and a free port); this only installs the package when no
# /usr/lib/postgresql/<N>/bin/initdb is there (Debian/Ubuntu). The machine's own clusters are
# neither started nor changed. Called by tests/setup_sshd.sh, so the README's test command
# installs it too.
set -e
for p in /usr/lib/postgresql/*/bin/initdb; do
    [ -x "$p" ] && exit 0
done
command -v apt-get >/dev/null 2>&1 || { echo "setup_postgres: no apt-get; install postgresql yourself" >&2; exit 0; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
# The package would create and start a "main" cluster on port 5432: not on a machine that
# only runs the tests (postgresql-common reads createcluster.d before it makes one).
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/opsrunner-tests.conf >/dev/null
# Not fatal: without it the PostgreSQL tests skip and say why (CI requires them: .ci/run).
{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null; } ||
    echo "setup_postgres: could not install postgresql; the PostgreSQL history tests will skip" >&2
