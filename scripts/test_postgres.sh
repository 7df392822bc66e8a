#!/usr/bin/env bash
# The PostgreSQL the `postgres`-marked tests and the PostgreSQL benches use:
# postgresql://postgres@127.0.0.1:5432/test with trust authentication on loopback.
# Installed and set up only on a machine that has no PostgreSQL at all (a fresh CI machine); an
# installation already there is never reconfigured: this prints what the tests need and leaves it.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then SUDO=""; AS_POSTGRES="runuser -u postgres --"; else SUDO="sudo"; AS_POSTGRES="sudo -u postgres"; fi
# A server already answering (a service started beside CI, a container, a local install) is used as it is.
if command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432; then exit 0; fi
if command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null ||
    echo "note: PostgreSQL is installed but not answering on 127.0.0.1:5432; the postgres tests need postgres@127.0.0.1:5432/test with trust authentication (README, Development)" >&2
  exit 0
fi
echo "installing PostgreSQL for the postgres tests (database test, trust authentication on 127.0.0.1)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
version=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -1)
# First match wins in pg_hba.conf: only the test database, only its user, only on loopback.
$SUDO sed -i '1i host test postgres 127.0.0.1/32 trust' "/etc/postgresql/$version/main/pg_hba.conf"
$SUDO pg_ctlcluster "$version" main reload 2>/dev/null || $SUDO pg_ctlcluster "$version" main start
for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
$AS_POSTGRES createdb test
